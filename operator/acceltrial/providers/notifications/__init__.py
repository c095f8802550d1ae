"""Where a trial's notifications go: a webhook, a Slack incoming webhook, an SNS topic."""
