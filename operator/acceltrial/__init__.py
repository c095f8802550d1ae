"""acceltrial: trial an ML model server on AWS Inferentia2/Trainium beside its GPU deployment.

The package is laid out in layers (see the README): ``api`` holds the AcceleratorTrial models and
the CRD generated from them, ``cli`` the ``acceltrial`` command, ``handlers`` the kopf handlers.
"""

__version__ = "0.1.0.dev0"
