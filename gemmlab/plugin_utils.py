"""The import path ``gemmlab.plugin_utils`` that plugins were documented with: this module replaces
itself in ``sys.modules`` with :mod:`gemmlab.contract.plugin_utils`, so both names give the very same
module object (a plugin's ``from gemmlab.plugin_utils import ...`` keeps working unchanged)."""

import sys

from gemmlab.contract import plugin_utils as _contract_module

sys.modules[__name__] = _contract_module
