"""``pylog consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` (ConsumerGroupCommand).

Same flags and output columns: ``--list`` (``--state [S1,S2]``: with the state,
optionally only groups in those states); ``--describe --group G`` with
``--offsets`` (the default), ``--members [--verbose]`` or ``--state``;
``--reset-offsets`` with one scenario (``--to-earliest``, ``--to-latest``,
``--to-offset``, ``--shift-by``, ``--to-datetime``, ``--by-duration``,
``--to-current``, ``--from-file`` CSV) over ``--topic``/``--all-topics``, a dry
run unless ``--execute``, refused while the group has members, ``--export``
printing the plan as Kafka's CSV; ``--delete`` (refused while it has members)
and ``--delete-offsets``.  ``--all-groups`` stands for every group with
``--describe``, ``--delete`` and ``--reset-offsets``.

It speaks the protocol itself (pylog's codec over one socket per broker,
:mod:`pylog.tools.wire`): the group requests go to the coordinator that
FindCoordinator names, the log end offsets to the bootstrap broker.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from pylog.coordinator.consumer_protocol import assignment_partitions
from pylog.protocol import ApiKey, error_name
from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    parse_bootstrap,
    run_tool,
    wire_config,
    wire_timeout,
)
from pylog.tools.wire import WireClient

TopicPartition = tuple[str, int]
EARLIEST, LATEST = -2, -1
# Kafka's reset scenarios, in the order its option checks name them.
SCENARIOS = ("to_offset", "to_datetime", "by_duration", "to_earliest", "to_latest",
             "to_current", "shift_by", "from_file")
# Kafka 3.6's ConsumerGroupState values (less Unknown), the names --list --state takes.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
_ERROR_TEXT = {
    "NON_EMPTY_GROUP": "The group is not empty.",
    "GROUP_ID_NOT_FOUND": "The group id does not exist.",
    "GROUP_SUBSCRIBED_TO_TOPIC": "The consumer group is actively subscribed to the topic",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
}


def _err(code: int) -> str:
    name = error_name(code)
    text = _ERROR_TEXT.get(name)
    return f"{name}: {text}" if text else name


@dataclass
class MemberInfo:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: list[TopicPartition]


@dataclass
class GroupInfo:
    group_id: str
    state: str
    protocol: str
    members: list[MemberInfo]


class Admin:
    """The requests the tool needs, on a bootstrap connection and the coordinator's."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.timeout = timeout
        self.bootstrap = WireClient(parse_bootstrap(bootstrap), timeout)
        self._coordinators: dict[tuple[str, int], WireClient] = {}
        self.coordinator_text = ""

    def close(self) -> None:
        self.bootstrap.close()
        for c in self._coordinators.values():
            c.close()

    def coordinator(self, group: str) -> WireClient:
        resp = self.bootstrap.request(ApiKey.FIND_COORDINATOR, {
            "key": group, "key_type": 0, "coordinator_keys": [group]})
        found = resp.coordinators[0] if resp.coordinators else resp
        if found.error_code:
            raise ToolError(f"Error: Executing consumer group command failed due to "
                            f"{_err(found.error_code)}")
        self.coordinator_text = f"{found.host}:{found.port} ({found.node_id})"
        address = (found.host, found.port)
        if address == self.bootstrap.address:
            return self.bootstrap
        client = self._coordinators.get(address)
        if client is None:
            client = self._coordinators[address] = WireClient([address], self.timeout)
        return client

    def list_groups(self, states: list[str] | None = None) -> list[tuple[str, str]]:
        """(group, state) pairs; with ``states``, only the groups in one of them."""
        # ListGroups v4 added the filter; an older broker gets none and we filter here.
        server_side = self.bootstrap.versions.get(int(ApiKey.LIST_GROUPS), (0, 0))[1] >= 4
        resp = self.bootstrap.request(ApiKey.LIST_GROUPS, {
            "states_filter": states if states and server_side else [], "types_filter": []})
        if resp.error_code:
            raise ToolError(f"Error: {_err(resp.error_code)}")
        groups = [(g.group_id, g.group_state) for g in resp.groups]
        if states:
            wanted = {s.lower() for s in states}
            groups = [(g, s) for g, s in groups if s.lower() in wanted]
        return groups

    def describe(self, group: str) -> GroupInfo:
        resp = self.coordinator(group).request(ApiKey.DESCRIBE_GROUPS, {"groups": [group]})
        g = resp.groups[0]
        if g.error_code:
            raise ToolError(f"Error: {_err(g.error_code)}")
        members = [MemberInfo(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              assignment_partitions(bytes(m.member_assignment))
                              if g.protocol_type == "consumer" else [])
                   for m in g.members]
        return GroupInfo(g.group_id, g.group_state, g.protocol_data, members)

    def committed(self, group: str) -> dict[TopicPartition, int]:
        resp = self.coordinator(group).request(ApiKey.OFFSET_FETCH, {
            "group_id": group, "topics": None, "require_stable": True,
            "groups": [{"group_id": group, "topics": None}]})
        topics = resp.groups[0].topics if resp.groups else resp.topics
        code = resp.groups[0].error_code if resp.groups else resp.error_code
        if code:
            raise ToolError(f"Error: {_err(code)}")
        return {(t.name, p.partition_index): p.committed_offset
                for t in topics for p in t.partitions if p.committed_offset >= 0}

    def partitions(self, topics: list[str]) -> dict[str, list[int]]:
        resp = self.bootstrap.request(ApiKey.METADATA, {
            "topics": [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False})
        out: dict[str, list[int]] = {}
        for t in resp.topics:
            if t.error_code:
                raise ToolError(f"Error: topic {t.name}: {_err(t.error_code)}")
            out[t.name] = sorted(p.partition_index for p in t.partitions)
        return out

    def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> dict[TopicPartition,
                                                                              int]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        if not by_topic:
            return {}
        resp = self.bootstrap.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp,
                                            "current_leader_epoch": -1, "max_num_offsets": 1}
                                           for p in ps]} for t, ps in by_topic.items()]})
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    out[(t.name, p.partition_index)] = p.offset
        return out

    def commit(self, group: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition,
                                                                             int]:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, p), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((p, offset))
        resp = self.coordinator(group).request(ApiKey.OFFSET_COMMIT, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1, "topics": [
                {"name": t, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "commit_timestamp": -1, "committed_metadata": ""} for p, o in ps]}
                for t, ps in by_topic.items()]})
        return {(t.name, p.partition_index): p.error_code
                for t in resp.topics for p in t.partitions}

    def delete_groups(self, groups: list[str]) -> dict[str, int]:
        out = {}
        for group in groups:
            resp = self.coordinator(group).request(ApiKey.DELETE_GROUPS,
                                                   {"groups_names": [group]})
            out.update({r.group_id: r.error_code for r in resp.results})
        return out

    def delete_offsets(self, group: str, tps: list[TopicPartition]
                       ) -> tuple[int, dict[TopicPartition, int]]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        resp = self.coordinator(group).request(ApiKey.OFFSET_DELETE, {
            "group_id": group, "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p in ps]}
                for t, ps in by_topic.items()]})
        return resp.error_code, {(t.name, p.partition_index): p.error_code
                                 for t in resp.topics for p in t.partitions}


# -- printing ---------------------------------------------------------------------

def _table(rows: list[list[str]], widths: list[int]) -> None:
    """Kafka's ``%-Ns`` columns: each at least its width, the last one unpadded."""
    for row in rows:
        cells = [f"{cell:<{w}}" for cell, w in zip(row[:-1], widths, strict=False)]
        print(" ".join([*cells, row[-1]]))


def _width(values: list[str], minimum: int = 15) -> int:
    return max([minimum, *map(len, values)])


def _describe_offsets(admin: Admin, info: GroupInfo) -> None:
    committed = admin.committed(info.group_id)
    owner: dict[TopicPartition, MemberInfo] = {}
    for m in info.members:
        for tp in m.partitions:
            owner[tp] = m
    tps = sorted(set(committed) | set(owner))
    ends = admin.list_offsets(tps, LATEST)
    rows = []
    for tp in tps:
        current = committed.get(tp)
        end = ends.get(tp)
        lag = "-" if current is None or end is None else str(max(end - current, 0))
        m = owner.get(tp)
        rows.append([info.group_id, tp[0], str(tp[1]), "-" if current is None else str(current),
                     "-" if end is None else str(end), lag,
                     m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-"])
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID"]
    widths = [_width([r[0] for r in rows]), _width([r[1] for r in rows]), 10, 15, 15, 15,
              _width([r[6] for r in rows]), _width([r[7] for r in rows])]
    print()
    _table([header, *rows], widths)


def _describe_members(info: GroupInfo, verbose: bool) -> None:
    rows = []
    for m in info.members:
        row = [info.group_id, m.member_id, m.instance_id or "-", m.host, m.client_id,
               str(len(m.partitions))]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(m.partitions):
                by_topic.setdefault(topic, []).append(p)
            row.append(", ".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items())
                       or "-")
        rows.append(row)
    header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        header.append("ASSIGNMENT")
    widths = [_width([r[i] for r in rows], len(header[i]) if i == 2 else 15) for i in range(5)]
    widths.append(15)
    print()
    _table([header, *rows], widths)


def _describe_state(admin: Admin, info: GroupInfo) -> None:
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [info.group_id, admin.coordinator_text, info.protocol or "", info.state,
           str(len(info.members))]
    print()
    _table([header, row], [_width([row[0]]), _width([row[1]], 25), 20, 20])


def _describe(admin: Admin, args: argparse.Namespace, groups: list[str]) -> int:
    status = 0
    for group in groups:
        info = admin.describe(group)
        if info.state == "Dead":
            print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
            status = 1
            continue
        if args.state is not None:
            _describe_state(admin, info)
            continue
        if info.state in ("PreparingRebalance", "CompletingRebalance"):
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
        elif not info.members:
            print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
        if args.members:
            _describe_members(info, args.verbose)
        else:
            _describe_offsets(admin, info)
    return status


# -- reset ------------------------------------------------------------------------

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration(text: str) -> timedelta:
    """ISO-8601 ``PnDTnHnMnS`` (Java's Duration.parse, the subset Kafka documents)."""
    found = _DURATION.match(text.strip().upper())
    if not found or text.strip().upper() in ("P", "PT"):
        raise ToolError(f"Error: --by-duration {text!r} is not a duration like PnDTnHnMnS")
    d, h, m, s = found.groups()
    return timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(m or 0),
                     seconds=float(s or 0))


def parse_datetime(text: str) -> int:
    """'YYYY-MM-DDTHH:mm:SS.sss' (local time), optionally with a zone ('Z', '+01:00')."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ToolError(f"Error: --to-datetime {text!r} is not a date like "
                        "'YYYY-MM-DDTHH:mm:SS.sss'") from None
    return int(parsed.timestamp() * 1000)


def _scope(admin: Admin, args: argparse.Namespace, group: str) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(admin.committed(group))
    if not args.topic:
        raise ToolError("Error: One of the reset scopes should be defined: --all-topics, "
                        "--topic.")
    tps: list[TopicPartition] = []
    whole = []
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        if sep and parts:
            tps += [(topic, int(p)) for p in parts.split(",") if p.strip()]
        else:
            whole.append(topic)
    for topic, ps in admin.partitions(whole).items():
        tps += [(topic, p) for p in ps]
    return sorted(set(tps))


def _clamped(admin: Admin, requested: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Kafka's checkOffsetsRange: "out of range offsets will be adjusted to
    available offset end"."""
    tps = sorted(requested)
    earliest = admin.list_offsets(tps, EARLIEST)
    latest = admin.list_offsets(tps, LATEST)
    return {tp: max(earliest.get(tp, 0), min(offset, latest.get(tp, offset)))
            for tp, offset in requested.items()}


def _targets(admin: Admin, args: argparse.Namespace, group: str,
             tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    earliest = admin.list_offsets(tps, EARLIEST)
    latest = admin.list_offsets(tps, LATEST)

    if args.to_earliest:
        return {tp: earliest[tp] for tp in tps if tp in earliest}
    if args.to_latest:
        return {tp: latest[tp] for tp in tps if tp in latest}
    if args.to_offset is not None:
        return _clamped(admin, {tp: args.to_offset for tp in tps})
    if args.to_current:
        return _current(admin, group, tps, latest)
    if args.shift_by is not None:
        committed = admin.committed(group)
        missing = [tp for tp in tps if tp not in committed]
        if missing:
            names = ", ".join(f"{t}-{p}" for t, p in missing)
            raise ToolError(f"Error: Executing consumer group command failed due to "
                            f"Partitions {names} have no committed offsets")
        return _clamped(admin, {tp: committed[tp] + args.shift_by for tp in tps})
    if args.to_datetime is not None or args.by_duration is not None:
        if args.to_datetime is not None:
            ts = parse_datetime(args.to_datetime)
        else:
            ts = int((time.time() - parse_duration(args.by_duration).total_seconds()) * 1000)
        found = admin.list_offsets(tps, ts)
        # No record at or after the time: the end of the log, as Kafka does.
        return {tp: found[tp] if found.get(tp, -1) >= 0 else latest.get(tp, 0) for tp in tps}
    raise ToolError("Error: Option --reset-offsets needs one of --to-datetime, "
                    "--by-duration, --to-earliest, --to-latest, --shift-by, --from-file, "
                    "--to-offset, --to-current")


def _current(admin: Admin, group: str, tps: list[TopicPartition],
             latest: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """--to-current as Kafka does it: the committed offset as it is (no clamping), and
    the log end offset for a partition the group has no offset for."""
    committed = admin.committed(group)
    missing = [tp for tp in tps if tp not in committed and tp not in latest]
    if missing:
        t, p = missing[0]
        raise ToolError(f"Error: Error getting ending offset of topic partition: {t}-{p}")
    return {tp: committed[tp] if tp in committed else latest[tp] for tp in tps}


def read_reset_plan(path: str, groups: list[str]) -> dict[str, dict[TopicPartition, int]]:
    """A --from-file plan, as Kafka's parseResetPlan reads it: with one --group,
    ``topic,partition,offset`` lines for that group; otherwise (or when the
    first line has four fields) ``group,topic,partition,offset`` lines."""
    try:
        with open(path, newline="") as f:
            rows = [row for row in csv.reader(f) if row]
    except OSError as exc:
        raise ToolError(f"Error: cannot read reset plan {path}: {exc.strerror}") from None
    except csv.Error as exc:
        raise ToolError(f"Error: reset plan {path} is not CSV: {exc}") from None
    single = len(groups) == 1 and bool(rows) and len(rows[0]) == 3
    plan: dict[str, dict[TopicPartition, int]] = {}
    for lineno, row in enumerate(rows, 1):
        fields = [groups[0], *row] if single else row
        try:
            group, topic, partition, offset = fields
            plan.setdefault(group, {})[(topic, int(partition))] = int(offset)
        except ValueError:
            shape = "topic,partition,offset" if single else "group,topic,partition,offset"
            raise ToolError(f"Error: Executing consumer group command failed due to line "
                            f"{lineno} of {path} is not {shape}: {','.join(row)}") from None
    return plan


def export_csv(results: dict[str, dict[TopicPartition, int]], with_group: bool) -> str:
    """Kafka's exportOffsetsToCsv: ``topic,partition,offset`` rows for one
    --group, ``group,topic,partition,offset`` otherwise; no header."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for group, targets in sorted(results.items()):
        for (topic, partition), offset in sorted(targets.items()):
            writer.writerow([group, topic, partition, offset] if with_group
                            else [topic, partition, offset])
    return out.getvalue()


def _reset(admin: Admin, args: argparse.Namespace, groups: list[str]) -> int:
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.",
              file=sys.stderr)
    plan = read_reset_plan(args.from_file, args.group) if args.from_file else None
    status = 0
    results: dict[str, dict[TopicPartition, int]] = {}
    for group in groups:
        info = admin.describe(group)
        if info.state not in ("Empty", "Dead"):
            # Kafka reports the group and goes on with the others.
            print(f"Error: Assignments can only be reset if the group '{group}' is "
                  f"inactive, but the current state is {info.state}.", file=sys.stderr)
            status = 1
            continue
        if plan is not None:
            if group not in plan:  # reported, as Kafka does; not a failure (--all-groups)
                print(f"Error: No reset plan for group {group} found", file=sys.stderr)
                continue
            targets = _clamped(admin, plan[group])
        else:
            targets = _targets(admin, args, group, _scope(admin, args, group))
        if args.execute:
            errors = admin.commit(group, targets)
            failed = {tp: e for tp, e in errors.items() if e}
            if failed:
                text = ", ".join(f"{t}-{p}: {_err(e)}" for (t, p), e in sorted(failed.items()))
                raise ToolError(f"Error: Executing consumer group command failed due to "
                                f"{text}")
        results[group] = targets
    if args.export:
        print(export_csv(results, with_group=len(args.group) != 1))
    elif results:
        rows = [[group, t, str(p), str(o)] for group, targets in sorted(results.items())
                for (t, p), o in sorted(targets.items())]
        print()
        _table([["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], *rows], [30, 30, 10])
    return status


# -- delete -----------------------------------------------------------------------

def _delete(admin: Admin, groups: list[str]) -> int:
    results = admin.delete_groups(groups)
    ok = [g for g in groups if results.get(g) == 0]
    failed = {g: code for g, code in results.items() if code}
    if ok:
        names = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
        for g, code in failed.items():
            print(f"* Group '{g}' could not be deleted due to: {_err(code)}", file=sys.stderr)
        return 1
    return 0


def _delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    if len(args.group) != 1:
        raise ToolError("Error: --delete-offsets supports one consumer group at a time.")
    group = args.group[0]
    if not args.topic:
        raise ToolError("Error: Option --delete-offsets needs --topic.")
    tps = _scope(admin, args, group)
    error, results = admin.delete_offsets(group, tps)
    if error:
        print(f"Error: Encounter some unknown error: {_err(error)}", file=sys.stderr)
        return 1
    if all(code == 0 for code in results.values()):
        print(f"Request succeed for deleting offsets with topic "
              f"{', '.join(args.topic)} group {group}")
    else:
        print("Request failed due to: Failed to delete some offsets", file=sys.stderr)
    rows = [[t, str(p), "Successful" if code == 0 else f"Error: {_err(code)}"]
            for (t, p), code in sorted(results.items())]
    print()
    _table([["TOPIC", "PARTITION", "STATUS"], *rows], [30, 15])
    return 0 if all(code == 0 for code in results.values()) else 1


# -- list -------------------------------------------------------------------------

def parse_states(text: str) -> list[str]:
    """``stable,EMPTY`` -> Kafka's names (ConsumerGroupState.parse is case-insensitive)."""
    by_lower = {s.lower(): s for s in GROUP_STATES}
    states = [by_lower.get(s.strip().lower()) for s in text.split(",")]
    if None in states:
        raise ToolError(f"Error: Invalid state list '{text}'. Valid states are: "
                        f"{', '.join(GROUP_STATES)}")
    return list(dict.fromkeys(states))


def _list(admin: Admin, args: argparse.Namespace, states: list[str] | None) -> int:
    if args.state is None:
        for g, _ in sorted(admin.list_groups()):
            print(g)
        return 0
    groups = admin.list_groups(states)
    rows = [[g, s] for g, s in sorted(groups)]
    _table([["GROUP", "STATE"], *rows], [_width([r[0] for r in rows])])
    return 0


# -- entry point ------------------------------------------------------------------

def _check_options(args: argparse.Namespace, action: str) -> None:
    """ConsumerGroupCommandOptions.checkArgs, before any connection."""
    if args.group and args.all_groups:
        raise ToolError('Error: Option "[group]" can\'t be used with option "[all-groups]"')
    if action in ("describe", "delete", "reset_offsets") and not (args.group
                                                                   or args.all_groups):
        raise ToolError(f"Error: Option --{action.replace('_', '-')} takes one of these "
                        "options: --group, --all-groups")
    if action in ("list", "delete_offsets") and args.all_groups:
        raise ToolError(f"Error: Option --all-groups can't be used with option "
                        f"--{action.replace('_', '-')}")
    if action == "delete_offsets" and not args.group:
        raise ToolError("Error: Option --delete-offsets takes the following options: "
                        "--group, --topic")
    if action == "delete" and args.topic:
        raise ToolError("Error: The consumer does not support topic-specific offset deletion "
                        "from a consumer group.")
    if args.describe and args.state:
        raise ToolError("Error: Option --describe does not take a value for --state")
    if args.describe and sum(map(bool, (args.members, args.offsets,
                                        args.state is not None))) > 1:
        raise ToolError("Error: Option --describe takes at most one of these options: "
                        "--members, --offsets, --state")
    scenarios = [name for name in SCENARIOS if getattr(args, name) not in (None, False)]
    reset_only = [f for f in ("execute", "dry_run", "export", "all_topics") if getattr(args, f)]
    if action != "reset_offsets" and (scenarios or reset_only):
        flag = (scenarios or reset_only)[0].replace("_", "-")
        raise ToolError(f"Error: Option --{flag} applies to --reset-offsets only")
    if action == "reset_offsets":
        if args.execute and args.dry_run:
            raise ToolError("Error: Option --reset-offsets only accepts one of --execute and "
                            "--dry-run")
        if len(scenarios) > 1:
            raise ToolError(f'Error: Option "[{scenarios[0].replace("_", "-")}]" can\'t be '
                            f'used with option "[{scenarios[1].replace("_", "-")}]"')


def _main(args: argparse.Namespace) -> int:
    actions = [a for a in ("list", "describe", "reset_offsets", "delete", "delete_offsets")
               if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError("Error: Command must include exactly one action: --list, --describe, "
                        "--delete, --reset-offsets, --delete-offsets")
    _check_options(args, actions[0])
    # Checked before connecting; a bare --state (const "") means every state.
    states = parse_states(args.state) if args.list and args.state else None
    timeout = wire_timeout(wire_config(args), args.timeout / 1000)
    admin = Admin(args.bootstrap_server, timeout)
    try:
        if args.list:
            return _list(admin, args, states)
        if args.delete_offsets:
            return _delete_offsets(admin, args)
        groups = (sorted(g for g, _ in admin.list_groups()) if args.all_groups
                  else list(dict.fromkeys(args.group)))
        if args.describe:
            return _describe(admin, args, groups)
        if args.reset_offsets:
            return _reset(admin, args, groups)
        return _delete(admin, groups)
    finally:
        admin.close()


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, reset and delete consumer "
                       "groups (kafka-consumer-groups.sh)")
    add_bootstrap(p)
    p.add_argument("--list", action="store_true", help="list all consumer groups")
    p.add_argument("--describe", action="store_true", help="describe consumer group(s)")
    p.add_argument("--delete", action="store_true", help="delete consumer group(s)")
    p.add_argument("--reset-offsets", action="store_true",
                   help="reset offsets of a consumer group (dry run unless --execute)")
    p.add_argument("--delete-offsets", action="store_true",
                   help="delete offsets of a consumer group")
    p.add_argument("--group", action="append", default=[], metavar="consumer group")
    p.add_argument("--all-groups", action="store_true",
                   help="apply to all consumer groups (--describe, --delete, --reset-offsets)")
    p.add_argument("--topic", action="append", default=[], metavar="topic[:partitions]",
                   help="topic, or topic:0,1 for some partitions (reset, delete-offsets)")
    p.add_argument("--all-topics", action="store_true",
                   help="every topic the group has offsets for (reset)")
    p.add_argument("--members", action="store_true", help="describe members")
    p.add_argument("--verbose", action="store_true", help="with --members: the assignment")
    # KIP-518: a value only with --list (filter by state); --describe --state takes none.
    p.add_argument("--state", nargs="?", const="", metavar="state1,state2",
                   help="with --describe: the group state; with --list: each group's state, "
                   "optionally only groups in the given states (case-insensitive)")
    p.add_argument("--offsets", action="store_true",
                   help="describe the offsets (the default)")
    p.add_argument("--execute", action="store_true", help="apply the reset")
    p.add_argument("--dry-run", action="store_true", help="only show the reset (default)")
    p.add_argument("--export", action="store_true",
                   help="print the reset as CSV (topic,partition,offset with one --group, "
                        "group,topic,partition,offset otherwise), the --from-file format")
    p.add_argument("--from-file", metavar="path to CSV file",
                   help="reset offsets to the values of a CSV file (as --export prints)")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-current", action="store_true")
    p.add_argument("--to-offset", type=int, metavar="offset")
    p.add_argument("--shift-by", type=int, metavar="number-of-offsets")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    p.add_argument("--by-duration", metavar="PnDTnHnMnS")
    p.add_argument("--timeout", type=int, default=5000, metavar="ms",
                   help="socket timeout in ms (default 5000)")
    p.set_defaults(func=run_tool(_main))
