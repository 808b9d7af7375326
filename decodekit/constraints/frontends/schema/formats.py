"""Strings: a JSON string's character (:data:`CHAR`), the string (:data:`STRING`), and the
``format`` keywords as regexes of the JSON text that admit only strings of the format
(:data:`FORMATS`), with the lengths of each format's texts (:data:`FORMAT_LENGTHS`)."""

from __future__ import annotations

# A character of a JSON string: raw (no quote, backslash, control character or lone surrogate),
# or an escape; a \u escape never names a surrogate, so each one decodes to exactly one character.
CHAR = (
    r'(?:[^"\\\x00-\x1f\ud800-\udfff]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
)


CHAR_STATES = 40


STRING = f'"{CHAR}*"'


_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001-9999 (Python's dates)


_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"


_DATE = (
    rf"(?:{_YEAR}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)"
    rf"|(?:0[13578]|1[02])-31)|{_LEAP}-02-29)"
)


_FRAC = r"(?:\.[0-9]{1,6})?"


_TIME = (
    rf"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    rf"|23:59:60{_FRAC}(?:[Zz]|[+-]00:00))"  # a leap second: 23:59:60 UTC only
)


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"


_HOST = rf"(?:{_LABEL}\.){{0,2}}[A-Za-z](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?"  # at most 191 characters


_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"


_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"


_H = "[0-9a-fA-F]{1,4}"


_IPV6 = (
    rf"(?:(?:{_H}:){{7}}{_H}|(?:{_H}:){{1,7}}:|(?:{_H}:){{1,6}}:{_H}|(?:{_H}:){{1,5}}(?::{_H}){{1,2}}"
    rf"|(?:{_H}:){{1,4}}(?::{_H}){{1,3}}|(?:{_H}:){{1,3}}(?::{_H}){{1,4}}|(?:{_H}:){{1,2}}(?::{_H}){{1,5}}"
    rf"|{_H}:(?::{_H}){{1,6}}|:(?:(?::{_H}){{1,7}}|:))"
)


_URI = rf"https?://{_HOST}(?::[1-9][0-9]{{0,3}})?(?:/[A-Za-z0-9._~!$&'()*+,;=:@-]*)*"


FORMATS = {  # each matches only texts that need no JSON escape (a "/" is written raw)
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}[Tt]{_TIME}",
    "email": rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": rf"{_OCTET}(?:\.{_OCTET}){{3}}",
    "ipv6": _IPV6,
    "hostname": _HOST,
    "uri": _URI,
    "json-pointer": r"(?:/(?:[A-Za-z0-9._-]|~[01])*)*",
}


# wider formats whose strings include those of a narrower one (an email is an idn-email)
# IDNA 2008 (RFC 5891 4.2.3.1) reserves "--" in a label's 3rd and 4th characters: "xn--" labels are
# A-labels whose Punycode must decode to a valid U-label ("xn--X", "xn--7a" do not), the others
# are invalid. An idn-hostname's labels here never have it (valid A-labels are left unwritten).
_IDN_TAIL = (  # a label after its first character
    r"(?:[A-Za-z0-9-]{0,2}[A-Za-z0-9]"
    r"|[A-Za-z0-9-](?:[A-Za-z0-9][A-Za-z0-9-]|-[A-Za-z0-9])[A-Za-z0-9-]{0,58}[A-Za-z0-9])?"
)


_IDN_HOST = rf"(?:[A-Za-z0-9]{_IDN_TAIL}\.){{0,2}}[A-Za-z]{_IDN_TAIL}"  # the last starts with a letter


FORMATS |= {"idn-email": FORMATS["email"], "idn-hostname": _IDN_HOST, "uri-reference": _URI, "iri": _URI}


FORMATS |= {"iri-reference": _URI, "uri-template": _URI}


# (shortest, longest) text of a format; None: unbounded (a length beside it needs an intersection)
FORMAT_LENGTHS = {
    "date": (10, 10),
    "uuid": (36, 36),
    "ipv4": (7, 15),
    "time": (9, 21),
    "date-time": (20, 32),
}


# formats validators check that are not supported (unknown formats are annotations: ignored)
UNSUPPORTED_FORMATS = frozenset(("regex", "duration", "relative-json-pointer"))
