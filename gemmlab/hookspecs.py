"""The import path ``gemmlab.hookspecs`` that plugins were documented with: this module replaces
itself in ``sys.modules`` with :mod:`gemmlab.contract.hookspecs`, so both names give the very same
module object (a plugin's ``from gemmlab.hookspecs import ...`` keeps working unchanged)."""

import sys

from gemmlab.contract import hookspecs as _contract_module

sys.modules[__name__] = _contract_module
