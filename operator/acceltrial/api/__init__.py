"""The AcceleratorTrial API: pydantic models of spec and status, and the CRD generated from them.

Pure: no I/O and no Kubernetes client here, so the engine, the CLI and the handlers share one
definition of what a valid trial is.
"""

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.api.trial import API_VERSION, GROUP, KIND, PLURAL, VERSION, AcceleratorTrial

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "AcceleratorTrial",
    "TrialSpec",
    "TrialStatus",
]
