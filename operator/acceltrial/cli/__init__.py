"""The ``acceltrial`` command (also installed as ``kubectl-acceltrial``, so ``kubectl acceltrial``
works): generating the CRD and validating manifests offline."""
