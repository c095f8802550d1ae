"""Where the Neuron-compiled artifacts are kept: the check that ``candidate.compiledArtifacts``
exists before anything changes."""
