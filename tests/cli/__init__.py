"""Tests of the command line (decodekit/cli/)."""
