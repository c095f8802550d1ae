-- Argo CD health of an acceltrial.dev AcceleratorTrial (install and semantics: docs/gitops.md).
-- Healthy once Promoted; Degraded when RolledBack, Failed or Aborted, or while the operator
-- refuses a change of the frozen spec; Suspended while Paused (by a person, on inconclusive
-- data, or awaiting approval); Progressing otherwise, also before the operator has written a
-- status or observed the latest generation. Argo CD runs health checks without Lua's string
-- library, so this script uses none.
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function said(phase, text)
  if text == nil or text == "" then
    return phase
  end
  return phase .. ": " .. text
end

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the acceltrial operator to admit the trial"
  return hs
end

local phase = status.phase
if phase == "Promoted" then
  hs.status = "Healthy"
  hs.message = said(phase, status.message)
  return hs
end
if phase == "RolledBack" or phase == "Failed" or phase == "Aborted" then
  hs.status = "Degraded"
  if status.decision ~= nil and status.decision.reason ~= nil then
    hs.message = said(phase, status.decision.reason)
  else
    hs.message = said(phase, status.message)
  end
  return hs
end

-- The operator no longer acts on a trial that has ended, so only a running trial waits for it
-- to observe a new generation.
local generation = obj.metadata.generation
local observed = status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the acceltrial operator to observe generation " .. tostring(generation)
    .. " (it last acted on " .. tostring(observed) .. ")"
  return hs
end

local refused = condition(status, "SpecChangeRejected")
if refused ~= nil and refused.status == "True" and phase ~= "RollingBack" then
  hs.status = "Degraded"
  hs.message = said("SpecChangeRejected", refused.message)
  return hs
end

if phase == "Paused" then
  hs.status = "Suspended"
  local reason = status.pauseReason
  if reason == nil then
    reason = "User"
  end
  hs.message = said("Paused (" .. reason .. ")", status.message)
  return hs
end

hs.status = "Progressing"
hs.message = said(phase, status.message)
return hs
