"""`pdctl size`: the cheapest GPU node types for a workload and its latency targets, offline.

The same model as the plan's SLO section (components/config/workload.py over serve_app's
performance model), asked of every GPU node type the preview accepts (NVIDIA, EFA, x86_64, a worker
pod that fits: the types the offline cloud describes, facts/instances.py) instead of the stack's
own. Each type runs both phases (one replica per `tensorParallelSize × pipelineParallelSize` GPUs;
a phase's replicas share a node as its GPUs allow, the phases never do), priced with the plan's cost
code in the stack's region. A type that cannot hold the model, or whose floors are above a target,
is listed with why. Settings come from the stack file, overridden per run as `pdctl plan --set`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from facts.instances import RECORDED_EC2_ANSWERS, InstanceType, instance_type
from facts.models import ModelArchitecture, known_model
from facts.slo_calibration import label_for
from pdctl.commands.common import PROJECT_OPTION, fail, text_console, use_project
from pdctl.slo_cost import choose_shape
from pdctl.views import Footnotes
from serve_app.checks import check_app
from serve_app.config import PHASES, PDAppConfig
from serve_app.errors import ConfigError
from serve_app.model_facts import read_model_facts
from serve_app.slo_sizing import MAX_REPLICAS, Targets, Workload
from serve_app.stack_keys import StackField
from serve_app.targets import DeploymentTarget


@dataclass(frozen=True)
class SizeOption:
    """One GPU node type for both phases: what the workload needs of it, or why it cannot serve it."""

    instance_type: str
    gpu: str
    gpus_per_node: int
    prefill_replicas: int | None = None
    decode_replicas: int | None = None
    prefill_nodes: int | None = None
    decode_nodes: int | None = None
    cost_per_hour: float | None = None  # PD's; None: unpriced in the region (or refused)
    colocated_replicas: int | None = None  # engines doing both phases
    colocated_nodes: int | None = None
    colocated_cost_per_hour: float | None = None
    recommended: str | None = None  # "PD" or "colocated"
    why: str = ""  # why that one
    tpot_floor_seconds: float | None = None  # at the datasheet's bandwidth
    long_ttft_floor_seconds: float | None = None
    calibration: str = ""
    refused: str | None = None  # why this type cannot meet the workload

    @property
    def recommended_cost_per_hour(self) -> float | None:
        return self.colocated_cost_per_hour if self.recommended == "colocated" else self.cost_per_hour

    @property
    def nodes(self) -> int | None:
        if self.prefill_nodes is None or self.decode_nodes is None:
            return None
        return self.prefill_nodes + self.decode_nodes

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "nodes": self.nodes}


@dataclass(frozen=True)
class SizeQuestion:
    """What `pdctl size` is asked: the workload, the targets, the engine and where it runs.
    `target_on(instance)`: what the plan would check the app against with gpuNodeType `instance`."""

    workload: Workload
    targets: Targets
    app: PDAppConfig
    model: ModelArchitecture | None
    region: str
    disk_gib: int
    target_on: Callable[[InstanceType], DeploymentTarget]


# Nodes every type is checked with: more than any replica count sized (MAX_REPLICAS per phase), so
# the stack's own node counts never bound what `pdctl size` answers.
UNBOUNDED_NODES = 2 * MAX_REPLICAS


def size_question(raw: Mapping[str, str]) -> SizeQuestion:
    """The question a stack's config (`raw`, as `offline.stack_config` gives it, with overrides)
    asks; every key validated as the program validates it (ConfigError naming the key)."""
    # Imported here, as the CLI's other heavy modules are: `pdctl --help` and the client commands stay light.
    from components.config.declared import project_name
    from components.config.nodes import GpuNodeSettings
    from components.config.observability import ObservabilitySettings
    from components.config.ray_service import RayServiceSettings
    from components.config.read import read_config
    from components.config.serving import deployment_target
    from components.config.workload import WorkloadSettings
    from components.config.zones import RegionSettings
    from serve_app.settings import ServeAppSettings
    from serve_app.stack_keys import from_stack_keys

    typed, texts = read_config(raw, project=project_name())
    app_settings = from_stack_keys(ServeAppSettings, typed, texts)
    region = typed[RegionSettings.key("region")]
    ray_service = from_stack_keys(RayServiceSettings, typed, texts).resolved(region)
    observability = from_stack_keys(ObservabilitySettings, typed, texts)
    return SizeQuestion(
        workload=from_stack_keys(WorkloadSettings, typed, texts).workload(),
        targets=Targets(observability.ttft_slo_seconds, observability.tpot_slo_seconds, observability.slo_objective),
        # The model facts the plan sizes with: the model's own files where readable, else the shipped ones.
        app=app_settings.app(), model=read_model_facts(app_settings.model_source).architecture or known_model(
            app_settings.app().model.architecture_key),
        region=region, disk_gib=from_stack_keys(GpuNodeSettings, typed, texts).disk_gib,
        target_on=lambda instance: deployment_target(ray_service, app_settings, instance,
                                                     node_count=UNBOUNDED_NODES))


def accepted_gpu_types() -> list[InstanceType]:
    """The GPU node types the preview accepts, of those the offline cloud describes."""
    from components.config.nodes import GpuNodeSettings, check_gpu_instance

    accepted = []
    for answer in RECORDED_EC2_ANSWERS.values():
        instance = instance_type(answer)
        try:
            check_gpu_instance(instance, GpuNodeSettings.field("instance_type"))
        except ConfigError:
            continue
        accepted.append(instance)
    return accepted


def size_on(instance: InstanceType, question: SizeQuestion) -> SizeOption:
    """What `question`'s workload needs of `instance` for both phases, or why it cannot."""
    from components.config.nodes import GpuNodeSettings
    from components.config.workload import refuse_unreachable, replica_models
    from components.sizing import worker_resources

    option = SizeOption(instance.name, instance.gpu_model or "none", instance.gpus,
                        calibration=label_for(instance.gpu_model or ""))
    try:
        model_bytes = question.model.weight_bytes("auto") if question.model else None
        worker_resources(instance, model_bytes, GpuNodeSettings.field("instance_type"))
        # The plan's own check and capacity report, so both size a type's replicas alike.
        checked = check_app(question.app, question.target_on(instance), model=question.model)
    except ConfigError as error:
        return _refused(option, f"{error.setting}: {error.why or error.allowed}")
    models = replica_models(checked, dict.fromkeys(PHASES, instance))
    if isinstance(models, str):
        return _refused(option, models)
    replica = models["decode"]
    try:
        # Every type with this GPU shares the floor: one note for them all.
        bounds = refuse_unreachable(models["prefill"], replica, question.workload, question.targets,
                                    {"prefill": "any type with it", "decode": "any type with it"})
    except ConfigError as error:
        return _refused(option, f"{_flag_for(error.setting)} {error.value:g} is below the floor: {error.allowed}")
    option = replace(option, tpot_floor_seconds=round(bounds.tpot_datasheet_seconds, 4),
                     long_ttft_floor_seconds=round(bounds.long_ttft_datasheet_seconds, 4))
    per_node = checked.nodes["decode"].replicas_per_node
    choice = choose_shape(models["prefill"], replica, question.workload, question.targets,
                          instance_types={"prefill": instance.name, "decode": instance.name},
                          replicas_per_node={"prefill": per_node, "decode": per_node}, region=question.region,
                          disk_gib=question.disk_gib)
    if choice.recommended is None:
        return _refused(option, f"neither PD nor colocated meets the targets with up to {MAX_REPLICAS} replicas")
    pd, colocated = choice.pd.replicas, choice.colocated.replicas
    return replace(option, prefill_replicas=None if pd is None else pd[0],
                   decode_replicas=None if pd is None else pd[1],
                   prefill_nodes=None if pd is None else -(-pd[0] // per_node),
                   decode_nodes=None if pd is None else -(-pd[1] // per_node),
                   cost_per_hour=_cents(choice.pd.cost_per_hour),
                   colocated_replicas=None if colocated is None else colocated[0],
                   colocated_nodes=choice.colocated.nodes,
                   colocated_cost_per_hour=_cents(choice.colocated.cost_per_hour),
                   recommended=choice.recommended, why=choice.why)


def _cents(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 4)


def _refused(option: SizeOption, why: str) -> SizeOption:
    return replace(option, refused=why)


def size_options(question: SizeQuestion) -> list[SizeOption]:
    """Every accepted type: priced options cheapest first (at the shape each recommends), then unpriced
    ones by nodes, then refused."""
    options = [size_on(instance, question) for instance in accepted_gpu_types()]
    return sorted(options, key=lambda o: (o.refused is not None, o.recommended_cost_per_hour is None,
                                          o.recommended_cost_per_hour or 0.0, o.nodes or 0, o.instance_type))


# ── The command ────────────────────────────────────────────────────────────────────────────────

class SizeOutput(StrEnum):
    text = "text"
    json = "json"


def flag_settings() -> dict[str, StackField]:
    """The stack setting each flag overrides for this run, as `--set key=value` would."""
    from components.config.observability import ObservabilitySettings
    from components.config.workload import WorkloadSettings
    from components.config.zones import RegionSettings

    workload = {flag: WorkloadSettings.field(name) for flag, name in (
        ("rate", "peak_requests_per_second"), ("prompt_tokens", "typical_prompt_tokens"),
        ("output_tokens", "typical_output_tokens"), ("long_prompt_tokens", "long_prompt_tokens"),
        ("long_output_tokens", "long_output_tokens"))}
    return {**workload, "ttft": ObservabilitySettings.field("ttft_slo_seconds"),
            "tpot": ObservabilitySettings.field("tpot_slo_seconds"),
            "objective": ObservabilitySettings.field("slo_objective"), "region": RegionSettings.field("region")}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:,.0f} ms"


# The table fits this many columns whole (each long text goes to a numbered note under it).
SIZE_TABLE_WIDTH = 100


def size_table(options: list[SizeOption], notes: Footnotes) -> Table:
    """One row per GPU node type, PD and colocated side by side; a refusal, the recommendation's
    reason and the calibration's label as notes."""
    table = Table("GPU node type", "GPU", "PD P+D\n→ nodes", "PD\nUSD/h", "colocated\n→ nodes", "colocated\nUSD/h",
                  "pick", "note")
    for option in options:
        if option.refused:
            table.add_row(option.instance_type, f"{option.gpus_per_node} × {option.gpu}", "-", "-", "-", "-", "-",
                          f"[yellow]{notes.cite(f'cannot: {option.refused}')}[/]")
            continue
        pd = "-" if option.prefill_replicas is None else \
            f"{option.prefill_replicas}+{option.decode_replicas} → {option.nodes}"
        colocated = "-" if option.colocated_replicas is None else \
            f"{option.colocated_replicas} → {option.colocated_nodes}"
        # A shape no replica count meets has no price to miss: "-" as its replicas, never "unpriced".
        table.add_row(option.instance_type, f"{option.gpus_per_node} × {option.gpu}", pd,
                      "-" if option.prefill_replicas is None else _price(option.cost_per_hour), colocated,
                      "-" if option.colocated_replicas is None else _price(option.colocated_cost_per_hour),
                      option.recommended or "-",
                      notes.cite(option.calibration))
    return table


def _price(cost: float | None) -> str:
    return "unpriced" if cost is None else f"${cost:,.2f}"


def render_size(console: Console, question: SizeQuestion, options: list[SizeOption]) -> None:
    workload, targets = question.workload, question.targets
    console.print(f"[bold]{escape(question.app.model.model_source)}[/] at {workload.requests_per_second:g} req/s "
                  f"peak, prompt → output {workload.typical_prompt_tokens} → {workload.typical_output_tokens} tokens "
                  f"(long {workload.long_prompt_tokens} → {workload.long_output_tokens}); p{targets.objective * 100:g} "
                  f"TTFT ≤ {_seconds(targets.ttft_seconds)}, TPOT ≤ {_seconds(targets.tpot_seconds)}; "
                  f"{question.region}, on-demand", highlight=False)
    notes = Footnotes()
    console.print(size_table(options, notes))
    notes.render(console)
    cheapest = next((option for option in options if not option.refused), None)
    if cheapest is not None:
        console.print(f"cheapest: [bold]{cheapest.instance_type}, {cheapest.recommended}[/]: {escape(cheapest.why)}",
                      highlight=False)
    console.print("[dim]PD P+D: prefill + decode replicas, then GPU nodes (the phases never share a node); "
                  "colocated: engines doing both phases, then GPU nodes; each row's pick says why in JSON "
                  "(-o json, with the floors at the datasheet peaks). Replicas predicted with efficiencies fitted "
                  "to the lab's measurements (each row's note says how). Model: docs/SIZING.md[/]")


def _flag_for(setting: str) -> str:
    """The flag that overrides `setting` (`--tpot` for tpotSloSeconds); the setting where none does."""
    flags = {field.key: f"--{name.replace('_', '-')}" for name, field in flag_settings().items()}
    return flags.get(setting.rpartition(":")[2], setting)


def flag_error(error: ConfigError, flags: Mapping[str, str | None]) -> str:
    """`error` in the words the user typed: the flag (`--ttft`) where a flag set the refused key."""
    typed = {field.key: name for name, field in flag_settings().items() if flags.get(name) is not None}
    name = typed.get(error.setting.rpartition(":")[2])
    if name is None:
        return str(error)
    text = f"{_flag_for(error.setting)}: got {flags[name]}; allowed: {error.allowed}" + (
        f" ({error.why})" if error.why else "")
    for key in typed:  # another key the refusal names, set by a flag too (≥ typicalPromptTokens)
        text = re.sub(rf"\b{key}\b", _flag_for(key), text)
    return text


def size_command(
    stack: str = typer.Option("dev", "--stack", "-s", help="Stack name: its settings are the defaults."),
    rate: str | None = typer.Option(None, "--rate", help="Requests per second at peak (peakRequestsPerSecond)."),
    prompt_tokens: str | None = typer.Option(None, "--prompt-tokens", help="typicalPromptTokens."),
    output_tokens: str | None = typer.Option(None, "--output-tokens", help="typicalOutputTokens."),
    long_prompt_tokens: str | None = typer.Option(None, "--long-prompt-tokens", help="longPromptTokens."),
    long_output_tokens: str | None = typer.Option(None, "--long-output-tokens", help="longOutputTokens."),
    ttft: str | None = typer.Option(None, "--ttft", help="TTFT target in seconds (ttftSloSeconds)."),
    tpot: str | None = typer.Option(None, "--tpot", help="TPOT target in seconds (tpotSloSeconds)."),
    objective: str | None = typer.Option(None, "--objective", help="Share of requests meeting both (sloObjective)."),
    region: str | None = typer.Option(None, "--region", help="AWS region to price in (aws:region)."),
    output: SizeOutput = typer.Option(SizeOutput.text, "--output", "-o"),
    project: Path | None = PROJECT_OPTION,
) -> None:
    """The cheapest GPU node types for a workload and its latency targets, each with its replicas, GPU
    nodes and price per hour; offline, from the stack's settings and these flags."""
    import yaml

    from offline import stack_config

    flags = {"rate": rate, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
             "long_prompt_tokens": long_prompt_tokens, "long_output_tokens": long_output_tokens,
             "ttft": ttft, "tpot": tpot, "objective": objective, "region": region}
    project_dir = use_project(project)
    try:
        raw, _secret_keys = stack_config(stack, project_dir)
        overridden = flag_settings()
        raw.update({overridden[name].key: value for name, value in flags.items() if value is not None})
        question = size_question(raw)
    except ConfigError as error:
        raise fail(f"stack {stack!r}: {flag_error(error, flags)}", 2) from None
    except yaml.YAMLError as error:
        raise fail(f"stack {stack!r}: the stack file is not valid YAML: {error}", 2) from None
    options = size_options(question)
    if output is SizeOutput.json:
        sys.stdout.write(json.dumps({"workload": asdict(question.workload), "targets": asdict(question.targets),
                                     "region": question.region, "options": [o.to_dict() for o in options]},
                                    indent=2) + "\n")
    else:
        render_size(text_console(None), question, options)
