"""Python ``regex``'s flags as ints, the letters of its inline flags ``(?aimsx...)``, and the flags
the compiler refuses (with what to write instead)."""

import regex

IGNORECASE = int(regex.IGNORECASE)
MULTILINE = int(regex.MULTILINE)
DOTALL = int(regex.DOTALL)
VERBOSE = int(regex.VERBOSE)
ASCII = int(regex.ASCII)
UNICODE = int(regex.UNICODE)
LOCALE = int(regex.LOCALE)
FULLCASE = int(regex.FULLCASE)
WORD = int(regex.WORD)
VERSION0 = int(regex.VERSION0)
VERSION1 = int(regex.VERSION1)
ENCODINGS = ASCII | LOCALE | UNICODE
GLOBAL = VERSION0 | VERSION1 | int(regex.BESTMATCH | regex.ENHANCEMATCH | regex.POSIX | regex.REVERSE)
FLAG_LETTERS = {
    "a": ASCII,
    "b": int(regex.BESTMATCH),
    "e": int(regex.ENHANCEMATCH),
    "f": FULLCASE,
    "i": IGNORECASE,
    "L": LOCALE,
    "m": MULTILINE,
    "p": int(regex.POSIX),
    "r": int(regex.REVERSE),
    "s": DOTALL,
    "u": UNICODE,
    "V0": VERSION0,
    "V1": VERSION1,
    "w": WORD,
    "x": VERBOSE,
}
UNSUPPORTED_FLAGS = {
    int(regex.BESTMATCH): "the BESTMATCH flag (?b)",
    int(regex.ENHANCEMATCH): "the ENHANCEMATCH flag (?e)",
    int(regex.POSIX): "the POSIX flag (?p)",
    int(regex.REVERSE): "the REVERSE flag (?r)",
    VERSION1: "VERSION1 (?V1) (set operations and full case folding)",
    FULLCASE: "full case folding (?f) (a character may match several)",
    LOCALE: "the LOCALE flag (?L)",
    WORD: "the WORD flag (?w) (Unicode default word boundaries)",
    MULTILINE: "the multiline flag (?m) (^ and $ are no-ops at the ends of a full match: drop the flag)",
}
