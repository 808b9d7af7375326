"""Utilities of the lowest layer: argument checks, checked file reads and writes, locks, lazy names."""
