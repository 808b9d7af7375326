"""Stages 2 and 3, automata: AST -> character DFA (``chardfa``) -> UTF-8 byte DFA (``utf8``);
products of several constraints (``product``); the graph algorithms they share (``graph``:
distances to acceptance, minimisation). Knows no vocabulary."""
