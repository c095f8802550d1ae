"""The commands the test bed adds to the ``acceltrial`` CLI (entry points of
``acceltrial.commands``): ``demo`` and ``sandbox``."""
