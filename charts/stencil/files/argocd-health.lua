-- Argo CD health of a parent that Stencil reconciles, read from the conditions Stencil
-- writes: Stalled=True is Degraded (a render error: it will not fix itself), Ready=True
-- is Healthy, Ready=False with reason Conflict is Degraded (an object Stencil will not
-- take), and anything else (Reconciling, Deleting, Finalizing, no status yet, a status
-- older than the spec) is Progressing.
local hs = {}
local function condition(conditions, kind)
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end
local function say(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  if c ~= nil and c.reason ~= nil then
    return c.reason
  end
  return fallback
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for Stencil to report a status"
  return hs
end
local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for Stencil to observe generation " .. generation
  return hs
end
local conditions = obj.status.conditions
local stalled = condition(conditions, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = say(stalled, "Stalled")
  return hs
end
local ready = condition(conditions, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = say(ready, "Ready")
  return hs
end
if ready ~= nil and ready.reason == "Conflict" then
  hs.status = "Degraded"
  hs.message = say(ready, "Conflict")
  return hs
end
hs.status = "Progressing"
hs.message = say(ready, say(condition(conditions, "Reconciling"), "Waiting for Ready"))
return hs
