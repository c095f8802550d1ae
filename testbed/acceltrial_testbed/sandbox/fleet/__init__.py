"""A simulated inference fleet for the sandbox: model servers for the Ready pods it holds.

``model`` is the serving model of one replica (pure), ``traffic`` splits requests by what the
cluster holds (HTTPRoute weights, or pods behind a Service), ``draws`` draws each pod's requests
at random around the model's rates (seeded), and ``exporter`` keeps each pod's counters of what
was drawn and serves them under the real servers' metric names (vLLM, neuron-monitor, DCGM).
"""
