"""Stage 1, syntax: Python ``regex`` (V0) pattern text -> an AST of :class:`~.nodes.Node`.

``parser`` (the exact reader, and the budgets it checks), ``nodes`` (the AST's named types),
``unicode`` (the Unicode tables read from ``regex``: ``\\w \\d \\s`` bits, scanned property
classes), ``casefold`` (``regex``'s simple case folding), ``firstset`` (``regex``'s first-character
test). Imports nothing from the later stages."""
