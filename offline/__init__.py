"""Run the real Pulumi program, or one component, with no CLI, no plugins and no cloud.

`run_offline(stack)` runs `__main__.py` for a stack the way `pulumi up` would start it (config merged
from Pulumi.yaml and the stack file) under Pulumi's mocks with a fake AWS account
(`offline.mock_cloud`), recording every registration. `run_components(register)` does the same for
a function that registers a few components. `pdctl plan`, `pdctl render`, the lab and the tests
all use this one harness. The stack is a new one unless `deployed=` says how it is deployed:
`deployed_stack_from_plan(plan)` tells that from a saved plan.
"""

from offline.deployed import deployed_stack_from_plan
from offline.harness import (
    OfflineRun,
    RegisteredResource,
    ask_recorded_cloud,
    run_components,
    run_offline,
    stack_config,
    try_run_offline,
)

__all__ = ["OfflineRun", "RegisteredResource", "ask_recorded_cloud", "deployed_stack_from_plan", "run_components",
           "run_offline", "stack_config", "try_run_offline"]
