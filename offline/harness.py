"""Run the real Pulumi program (or a few components) with no CLI, no plugins and no cloud: Pulumi's
mocks, recorded.

What the Pulumi CLI would do before starting the program, this module does itself:
- merge the project's `config:` defaults from `Pulumi.yaml` with `Pulumi.<stack>.yaml` and hand the
  result to the SDK as the engine would (every value a string; arrays and objects as JSON text);
- mark secret keys. Values stored as `secure:` cannot be decrypted offline: they are replaced by a
  placeholder and stay marked secret, so the program takes the same code path as with a real token
  (`apiKeys` by a key table of its shape, which the key check accepts).

Then it runs `__main__.py` under `pulumi.runtime` mocks with `preview=False` (under `preview=True`
unknown outputs skip `.apply` and a failing check inside one passes silently) and records every
resource registration with its parent, explicit dependencies, provider and resource options. Each
run happens in a fresh `contextvars.Context` and a fresh event loop, so runs are independent within
one process. `run_components(register)` does the same for a function that registers resources
itself (one component and what it needs), with the same recording.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import runpy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG_VALUE = "1b47061264138c4ac30d75fd1eb44270"
STACK_TYPE = "pulumi:pulumi:Stack"


def offline_secret_placeholder(key: str) -> str:
    return f"offline-placeholder-for-secret-{key}"


@dataclass(frozen=True)
class RegisteredResource:
    """One resource registration as the engine received it (inputs camelCase, numbers as floats)."""

    type: str
    name: str
    urn: str
    inputs: dict[str, Any]
    parent: str
    dependencies: tuple[str, ...]
    provider: str
    custom: bool
    secret_paths: frozenset[str] = frozenset()
    protect: bool = False  # `pulumi destroy` refuses while set
    retain_on_delete: bool = False  # a delete (destroy, or gone from the program) only drops it from state
    replace_on_changes: tuple[str, ...] = ()
    ignore_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    custom_timeouts: Any = None  # the engine's CustomTimeouts message (create/update/delete strings)
    additional_secret_outputs: tuple[str, ...] = ()


@dataclass
class OfflineRun:
    stack: str
    config: dict[str, str]
    resources: list[RegisteredResource] = field(default_factory=list)
    invokes: list[str] = field(default_factory=list)  # provider function tokens, in call order
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)
    error: BaseException | None = None
    # The program's module globals after it ran: what it computed besides resources (__main__.py
    # binds `settings` and `stack`), so the plan reports the program's own checks, not a re-derivation.
    program: dict[str, Any] = field(default_factory=dict)
    # Values the mocks made up (ids, ARNs, AZ names, ...) -> what each stands for: stand-ins for what
    # AWS will answer, which a plan marks as such. Empty for mocks that keep no such record.
    invented: dict[str, str] = field(default_factory=dict)
    # What the program logged with pulumi.log.warn, in order: what `pulumi preview` shows as warnings.
    warnings: list[str] = field(default_factory=list)
    # What it logged with pulumi.log.info: what `pulumi preview` lists under Diagnostics as info.
    infos: list[str] = field(default_factory=list)

    def all(self, type_: str) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> RegisteredResource:
        found = [r for r in self.all(type_) if name is None or r.name == name]
        if len(found) != 1:
            names = [r.name for r in self.all(type_)]
            raise LookupError(f"expected one {type_} named {name!r}, found {len(found)} among {names}")
        return found[0]

    def by_urn(self, urn: str) -> RegisteredResource:
        for r in self.resources:
            if r.urn == urn:
                return r
        raise LookupError(urn)

    def children(self, parent: RegisteredResource) -> list[RegisteredResource]:
        return [r for r in self.resources if r.parent == parent.urn]

    def depends_on(self, resource: RegisteredResource, other: RegisteredResource) -> bool:
        """True if the engine will create `resource` only after `other`: through its own recorded
        dependencies, transitively. A dependency on a resource inside the component `other` counts.
        A parent's dependencies do not: Pulumi does not pass them on to children, so a component
        whose children must wait has to say so on each child."""
        seen: set[str] = set()
        pending = list(resource.dependencies)
        while pending:
            urn = pending.pop()
            if urn in seen:
                continue
            seen.add(urn)
            if urn == other.urn or self._is_ancestor(urn, other.urn):
                return True
            node = self._maybe(urn)
            if node is not None:
                pending.extend(node.dependencies)
        return False

    def _maybe(self, urn: str) -> RegisteredResource | None:
        return next((r for r in self.resources if r.urn == urn), None)

    def _is_ancestor(self, descendant: str, ancestor: str) -> bool:
        node = self._maybe(descendant)
        while node is not None and node.parent:
            if node.parent == ancestor:
                return True
            node = self._maybe(node.parent)
        return False

    @property
    def registered(self) -> list[RegisteredResource]:
        """Everything but the root Stack: what a failed run must leave empty."""
        return [r for r in self.resources if r.type != STACK_TYPE]


def stack_config(stack: str, project_dir: Path | None = None) -> tuple[dict[str, str], set[str]]:
    """The config the CLI would hand the program: (key -> string, secret keys). Keys are
    fully qualified (`<project>:<key>`, `aws:region`)."""
    from components.config.declared import as_config_string, declared_keys, load_yaml_strictly, project_name
    from components.config.front_door import API_KEYS_KEY, FrontDoorSettings, offline_api_keys
    from components.project import find_project_dir

    project_dir = project_dir or find_project_dir()
    name = project_name(project_dir / "Pulumi.yaml")
    merged: dict[str, str] = {}
    secret_keys: set[str] = set()
    # Pulumi.yaml's declarations, read where the program reads them: the defaults and which are secret.
    for key, declared in declared_keys(project_dir / "Pulumi.yaml").items():
        full = key if ":" in key else f"{name}:{key}"
        if declared.default is not None:
            merged[full] = declared.default
        if declared.secret:
            secret_keys.add(full)
    stack_file = project_dir / f"Pulumi.{stack}.yaml"
    if not stack_file.exists():
        from serve_app.errors import ConfigError

        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))
        raise ConfigError("stack", stack, ", ".join(known), f"no file {stack_file.name}")
    # Strictly: a key set twice is refused, as the Pulumi CLI refuses it.
    stack_doc = load_yaml_strictly(stack_file) or {}
    encrypted: list[str] = []
    for key, value in _stack_settings(stack_doc, stack_file.name).items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            encrypted.append(full)
            secret_keys.add(full)
        else:
            merged[full] = as_config_string(value)
    # After the plain settings: an apiKeys stand-in names the keys apiKeyLimits names.
    for full in encrypted:
        key = full.split(":")[-1]
        merged[full] = (offline_api_keys(merged.get(f"{name}:{FrontDoorSettings.key('key_limits')}", ""))
                        if key == API_KEYS_KEY else offline_secret_placeholder(key))
    return merged, secret_keys


# The top-level keys of a stack file (Pulumi's ProjectStack): anything else is a typo the CLI ignores.
STACK_FILE_KEYS = ("config", "environment", "secretsprovider", "encryptedkey", "encryptionsalt")


def _stack_settings(stack_doc: Any, file_name: str) -> dict[str, Any]:
    """The `config:` mapping of a stack file; a misspelt top-level key or a file without settings is
    refused naming the file, not blamed on the first setting whose default cannot deploy."""
    from serve_app.errors import ConfigError, unknown_setting

    if not isinstance(stack_doc, dict):
        raise ConfigError(file_name, stack_doc, "a mapping with a `config:` key",
                          message=f"{file_name}: start it with `config:` (a mapping of settings); see Pulumi.dev.yaml")
    for key in stack_doc:
        if key not in STACK_FILE_KEYS:
            raise unknown_setting(str(key), stack_doc[key], list(STACK_FILE_KEYS),
                                  what="top-level key", where=f" in {file_name}")
    config = stack_doc.get("config") or {}
    if not isinstance(config, dict) or not config:
        raise ConfigError("config", config, "the stack's settings",
                          message=f"{file_name} sets no `config:`: set at least aws:region and "
                                  "apiPublicAccessCidrs (copy Pulumi.dev.yaml's)")
    return config


def _unwrap_secrets(value: Any, path: str, secret_paths: set[str]) -> Any:
    if isinstance(value, dict):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG_VALUE:
            secret_paths.add(path)
            return _unwrap_secrets(value.get("value"), path, secret_paths)
        return {k: _unwrap_secrets(v, f"{path}.{k}" if path else k, secret_paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v, f"{path}[{i}]", secret_paths) for i, v in enumerate(value)]
    return value


# Pulumi's mock monitor runs on a thread of its own with its own event loop. Deserialising a
# resource reference there (a Role passed to a component, e.g. eks.Cluster's service_role) would
# re-create the resource on that loop, and the program's loop then fails on it ("attached to a
# different loop"). Inside the monitor a resource reference stays its URN (or id), which is all a
# mock and the recording need; the program's own thread still gets resources back.
_monitor_call = threading.local()


def _references_stay_urns_inside_the_monitor() -> None:
    from pulumi.runtime import rpc

    if getattr(rpc, "_offline_harness_patched", False):
        return
    real_module, real_package = rpc.get_resource_module, rpc.get_resource_package

    def get_resource_module(pkg: str, mod: str, version: str) -> rpc.ResourceModule | None:
        return None if getattr(_monitor_call, "active", False) else real_module(pkg, mod, version)

    def get_resource_package(pkg: str, version: str) -> rpc.ResourcePackage | None:
        return None if getattr(_monitor_call, "active", False) else real_package(pkg, version)

    rpc.get_resource_module, rpc.get_resource_package = get_resource_module, get_resource_package
    setattr(rpc, "_offline_harness_patched", True)  # noqa: B010 (a marker of ours on Pulumi's module)


def _inside_monitor(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any) -> Any:
        _monitor_call.active = True
        try:
            return method(*args)
        finally:
            _monitor_call.active = False
    return call


def _recording_monitor(mocks: Any, run: OfflineRun) -> Any:
    from pulumi.runtime import mocks as pulumi_mocks
    from pulumi.runtime import rpc

    _references_stay_urns_inside_the_monitor()

    class RecordingMonitor(pulumi_mocks.MockMonitor):
        @_inside_monitor
        def Invoke(self, request):
            run.invokes.append(request.tok)
            return super().Invoke(request)

        @_inside_monitor
        def RegisterResource(self, request):
            response = super().RegisterResource(request)
            secret_paths: set[str] = set()
            inputs = _unwrap_secrets(rpc.deserialize_properties(request.object), "", secret_paths)
            run.resources.append(
                RegisteredResource(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    inputs=inputs,
                    parent=request.parent,
                    dependencies=tuple(request.dependencies),
                    provider=request.provider,
                    custom=bool(request.custom),
                    secret_paths=frozenset(secret_paths),
                    protect=bool(request.protect),
                    retain_on_delete=bool(request.retainOnDelete),
                    replace_on_changes=tuple(request.replaceOnChanges),
                    ignore_changes=tuple(request.ignoreChanges),
                    delete_before_replace=bool(request.deleteBeforeReplace),
                    custom_timeouts=request.customTimeouts,
                    additional_secret_outputs=tuple(request.additionalSecretOutputs),
                )
            )
            return response

    return RecordingMonitor(mocks)


def _engine_log(run: OfflineRun) -> logging.Logger:
    """The mock engine's logger: the program's warnings are kept in `run.warnings` (the caller shows
    them once) and its infos in `run.infos`, not printed by Python's root logger as they happen."""

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                run.warnings.append(record.getMessage())
            elif record.levelno == logging.INFO:
                run.infos.append(record.getMessage())

    logger = logging.Logger(f"offline-run-{run.stack}")  # outside the logging tree: nothing propagates
    logger.addHandler(Keep())
    return logger


def _run_in_mocks(run: OfflineRun, project: str, stack: str, secret_keys: set[str], mocks: Any,
                  project_dir: Path, body: Callable[[], Any]) -> None:
    """Run `body` as a Pulumi program under recording mocks; called inside a fresh contextvars.Context.
    Its error, if any, is recorded; the root Stack's outputs are resolved into `run.outputs`."""
    import pulumi
    from pulumi.runtime import config as pulumi_config
    from pulumi.runtime import mocks as pulumi_mocks
    from pulumi.runtime import settings as pulumi_settings
    from pulumi.runtime.stack import run_in_stack

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi_config.set_all_config(dict(run.config), sorted(secret_keys))
        monitor = _recording_monitor(mocks, run)
        pulumi_settings.ROOT.set(None)
        pulumi_settings.configure(
            pulumi_mocks.MockSettings(
                monitor=monitor,
                monitor_features=set(monitor.GetDeploymentInfo(None).supportedFeatures),
                engine=pulumi_mocks.MockEngine(_engine_log(run)),
                project=project,
                stack=stack,
                dry_run=False,
                organization="organization",
                callbacks=None,
                root_directory=str(project_dir),
            )
        )
        # The root Stack lives in the context of the task that runs the program: catch it there.
        roots: list[Any] = []

        def main() -> None:
            roots.append(pulumi_settings.get_root_resource())
            body()

        try:
            loop.run_until_complete(run_in_stack(main))
        except BaseException as exc:
            run.error = exc
            return
        for key, value in roots[0].outputs.items():
            out = pulumi.Output.from_input(value)
            run.outputs[key] = loop.run_until_complete(out.future(with_unknowns=True))
            if loop.run_until_complete(out.is_secret()):
                run.secret_outputs.add(key)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def try_run_offline(
    stack: str,
    *,
    overrides: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    project_dir: Path | None = None,
    mocks: Any = None,
    deployed: Any = None,
) -> OfflineRun:
    """Run the program for `stack`; a failure is recorded in `.error`, never raised.

    `overrides` and `secrets` take config keys as a user writes them (`gpuNodeCount`, `aws:region`)
    and string values as `pulumi config set` stores them. `mocks` defaults to the fake AWS account
    of `offline.mock_cloud` for the stack's region, where the stack is new, or deployed as
    `deployed` (a `components.discovery.DeployedStack`; `offline.deployed_stack_from_plan` reads
    one from a saved plan) says.
    """
    from components.config.declared import project_name
    from components.project import find_project_dir

    project_dir = project_dir or find_project_dir()
    project = project_name(project_dir / "Pulumi.yaml")
    config, secret_keys = stack_config(stack, project_dir)

    def qualify(key: str) -> str:
        return key if ":" in key else f"{project}:{key}"

    for key, value in (overrides or {}).items():
        config[qualify(key)] = value
    for key, value in (secrets or {}).items():
        config[qualify(key)] = value
        secret_keys.add(qualify(key))
    run = OfflineRun(stack=stack, config=config)
    if mocks is None:
        from offline.mock_cloud import CloudMocks

        mocks = CloudMocks(config.get("aws:region", "us-west-2"), deployed=deployed)
    program = str(project_dir / "__main__.py")

    def body() -> None:
        run.program.update(runpy.run_path(program, run_name="__main__"))

    _isolated(run, project, stack, secret_keys, mocks, project_dir, body)
    run.invented.update(getattr(mocks, "invented", {}))
    run.warnings.extend(getattr(mocks, "unrecorded", ()))
    return run


def _isolated(run: OfflineRun, project: str, stack: str, secret_keys: set[str], mocks: Any, project_dir: Path,
              body: Callable[[], Any]) -> None:
    from components.project import PROJECT_ENV

    saved_env = {k: os.environ.pop(k) for k in ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS", PROJECT_ENV)
                 if k in os.environ}
    # The program's own look-ups (declared settings, dashboards) read the same project as the run.
    os.environ[PROJECT_ENV] = str(project_dir)
    try:
        contextvars.Context().run(_run_in_mocks, run, project, stack, secret_keys, mocks, project_dir, body)
    finally:
        os.environ.pop(PROJECT_ENV, None)
        os.environ.update(saved_env)


def run_components(register: Callable[[], Any], *, stack: str = "dev", mocks: Any = None,
                   project_dir: Path | None = None) -> OfflineRun:
    """Run `register()` (which registers components and returns what it built, kept in
    `run.program["result"]`) under the same recording mocks as a whole program. A failure is recorded
    in `.error`. `mocks` defaults to echoing every resource's inputs as its outputs."""
    from components.config.declared import project_name
    from components.project import find_project_dir

    project_dir = project_dir or find_project_dir()
    project = project_name(project_dir / "Pulumi.yaml")
    run = OfflineRun(stack=stack, config={})

    def body() -> None:
        run.program["result"] = register()

    if mocks is None:
        from offline.mock_cloud import EchoMocks

        mocks = EchoMocks()
    _isolated(run, project, stack, set(), mocks, project_dir, body)
    return run


def ask_recorded_cloud(query: Any, *, mocks: Any = None) -> Any:
    """The program's own discovery (`components.discovery.discover`) answered by the mock cloud's
    recorded answers (or `mocks`): what `settings_from_config(..., ask_cloud=...)` takes in tests
    and tools that validate settings without running the whole program."""
    from components.discovery import discover
    from offline.mock_cloud import CloudMocks

    run = run_components(lambda: discover(query), mocks=mocks or CloudMocks(query.region))
    if run.error is not None:
        raise run.error
    return run.program["result"]


def run_offline(stack: str, **kwargs: Any) -> OfflineRun:
    """Like `try_run_offline`, but a failed run raises its error (a `ConfigError` for a user mistake)."""
    run = try_run_offline(stack, **kwargs)
    if run.error is not None:
        raise run.error
    return run
