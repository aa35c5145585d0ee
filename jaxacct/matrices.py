"""``jaxacct.matrices`` is ``jaxacct.strategies.banded_toeplitz`` (its name before the strategies
package): the same module object, so every name and patch of either path is shared."""

import sys

from jaxacct.strategies import banded_toeplitz as _module

sys.modules[__name__] = _module
