"""dp_accounting's private attributes, read in one module (``deterministic/pld_pmfs.py``), and
an accounting-only import (issue 31 item 8)."""

import subprocess
import sys

import pytest
from dp_accounting.pld import privacy_loss_mechanism

from jaxacct.deterministic import pld_pmfs


def test_the_installed_dp_accounting_has_every_private_attribute_jaxacct_reads():
  pld_pmfs.check_dp_accounting.cache_clear()
  pld_pmfs.check_dp_accounting()


def test_a_dp_accounting_without_one_is_refused_naming_it_and_the_range(monkeypatch):
  monkeypatch.delattr(privacy_loss_mechanism.MixtureGaussianPrivacyLoss,
                      '_inverse_privacy_losses_with_range')
  pld_pmfs.check_dp_accounting.cache_clear()
  try:
    with pytest.raises(ImportError, match=r'lacks _inverse_privacy_losses_with_range.*'
                                          r'dp-accounting>=0.6.0,<0.7'):
      pld_pmfs.check_dp_accounting()
  finally:
    pld_pmfs.check_dp_accounting.cache_clear()


@pytest.mark.multiprocess
def test_importing_jaxacct_needs_neither_flax_nor_optax_nor_scikit_learn():
  code = ('import sys, jaxacct; '
          'print(sorted(m for m in ("flax", "optax", "sklearn", "orbax") if m in sys.modules))')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == '[]'
