"""Front ends that produce what the syntax stage reads: ``schema`` (JSON Schema -> a regex).
A later front end lives here too, beside it; it imports the syntax stage at most."""
