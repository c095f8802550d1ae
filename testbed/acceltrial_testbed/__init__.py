"""The acceltrial test bed: local control planes (the emulator and the upstream one), the
simulated fleet of model servers, and the demo, with the ``acceltrial demo`` and ``acceltrial
sandbox`` commands they serve. A package of its own, installed by ``make setup`` (``pip install
-e testbed/``), never by ``pip install .``: the operator image carries none of it."""
