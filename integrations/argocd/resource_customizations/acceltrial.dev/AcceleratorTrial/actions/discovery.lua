-- Argo CD resource actions of an acceltrial.dev AcceleratorTrial (docs/gitops.md). Each action
-- sets the annotation acceltrial.dev/action, which the operator takes on its next tick and then
-- removes; an action the phase does not take is ignored by the operator, so it is offered only
-- in the phases that take it (operator/acceltrial/engine/lifecycle.py).
local actions = {}
local status = obj.status
if status == nil then
  status = {}
end
-- A trial without a status is Pending to the operator.
local phase = status.phase
if phase == nil then
  phase = "Pending"
end
local step = status.step
if step == nil then
  step = 0
end
local ended = phase == "Promoted" or phase == "RolledBack" or phase == "Failed"
  or phase == "Aborted"
-- While the operator refuses a change of the frozen spec, the trial holds and takes only abort.
local held = false
if status.conditions ~= nil then
  for _, c in ipairs(status.conditions) do
    if c.type == "SpecChangeRejected" and c.status == "True" then
      held = true
    end
  end
end
local awaiting = phase == "Paused" and status.pauseReason == "AwaitingApproval" and not held

-- Pause is taken while a step runs (not while the candidate is still being deployed).
actions["pause"] = {
  ["disabled"] = held or not (phase == "Progressing" and step >= 1),
  ["iconClass"] = "fa fa-fw fa-pause-circle",
  ["displayName"] = "Pause",
}
actions["resume"] = {
  ["disabled"] = held or not (phase == "Paused" and status.pauseReason ~= "AwaitingApproval"),
  ["iconClass"] = "fa fa-fw fa-play-circle",
  ["displayName"] = "Resume",
}
actions["approve"] = {
  ["disabled"] = not awaiting,
  ["iconClass"] = "fa fa-fw fa-check-circle",
  ["displayName"] = "Approve promotion",
}
-- Abort rolls back from any phase until a rollback is under way or the trial has ended.
actions["abort"] = {
  ["disabled"] = ended or phase == "RollingBack",
  ["iconClass"] = "fa fa-fw fa-times-circle",
  ["displayName"] = "Abort (roll back)",
}
return actions
