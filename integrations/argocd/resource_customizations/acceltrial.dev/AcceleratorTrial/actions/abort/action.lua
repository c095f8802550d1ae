-- Ask the acceltrial operator to abort the trial: it takes the annotation on its next tick
-- and removes it (docs/gitops.md).
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["acceltrial.dev/action"] = "abort"
return obj
