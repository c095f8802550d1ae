"""The quality check before exposure (``spec.quality``): the prompt set as the user writes it
(``prompts``) and the comparison of both variants' answers, with intervals (``compare``).
Pure: prompts and scores in, verdicts out; asking the model servers is a provider's business."""
