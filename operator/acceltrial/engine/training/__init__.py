"""Training trials (``TrainingTrial``): the same training job on GPUs and on Trainium, judged by
cost and time per training run and by loss parity. Pure: the training script's log lines
(``logs``), the steady-state speed and the run's economics (``runs``) and the loss curves at
matched steps (``loss``) in, figures with their uncertainty out; running the Jobs and reading
their logs is the handlers' business."""
