"""The former name of :mod:`decodekit.jobs` (generation jobs over JSON lines): the same module
object, so that setting an attribute through either name sets it for both."""

import sys

from decodekit import jobs

sys.modules[__name__] = jobs
