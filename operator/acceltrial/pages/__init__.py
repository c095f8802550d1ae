"""What the CLI and the test bed's demo both print: the decision report as Markdown and HTML
(``render``, with ``evidence`` and ``savings``), its charts (``charts``, the ``charts`` extra),
figures in their units (``units``) and the progress bar."""
