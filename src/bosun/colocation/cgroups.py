"""The node agent's cgroup executor: per-pod settings for its QoS class, cgroup v1 or v2,
written as one step with the previous values restored if a write fails.

**Detection** (:func:`detect`): a cgroup v2 unified tree has ``cgroup.controllers`` at its
root; a v1 tree has one mount per controller (``cpu``, ``cpuacct``, ``memory``) under the
root. The executor writes to the ``cpu`` and ``memory`` hierarchies (v1) or the one tree
(v2).

**Settings per pod** (:func:`pod_settings`), from the pod's CPU request/limit
(milli-CPU; for BE pods the ``kubernetes.io/batch-cpu`` request) and memory request/limit
(bytes):

=========================  ==========================================  =====================
file                       value                                        source
=========================  ==========================================  =====================
v1 ``cpu.shares``          ``max(2, milli * 1024 // 1000)``; BE: 2      kubelet MilliCPUToShares
v1 ``cpu.cfs_period_us``   100000                                       kubelet default period
v1 ``cpu.cfs_quota_us``    ``limit_milli * 100`` (>= 1000), else -1     kubelet MilliCPUToQuota
v2 ``cpu.weight``          ``1 + (shares - 2) * 9999 // 262142``        KEP-2254 conversion
v2 ``cpu.max``             ``"<quota> 100000"``, else ``"max 100000"``
``cpu.idle``               1 for BE, 0 otherwise; **pod level only**    Linux SCHED_IDLE groups
v1 ``memory.limit_in_bytes``      limit, else -1 (unlimited)
v1 ``memory.soft_limit_in_bytes`` request for online pods, 0 for BE (reclaimed first), -1 if none
v2 ``memory.min``          request for LSE/LSR (hard protection), else 0  KEP-2570 (MemoryQoS)
v2 ``memory.low``          request for LS, else 0
v2 ``memory.high``         ``req + 0.9 * (limit - req)``, page-aligned; ``max``  KEP-2570
v2 ``memory.max``          limit, else ``max``
=========================  ==========================================  =====================

``cpu.idle`` is never written on a QoS-level group: with it set the kernel refuses
``cpu.shares`` writes (EINVAL; probed on this machine's v1 tree), which is what broke
kubelets in Koordinator's history since kubelet writes ``cpu.shares`` on the QoS roots.
:meth:`CgroupExecutor.apply` raises :class:`CgroupError` if asked to.

**One step** (:meth:`CgroupExecutor.apply`): every file is checked to exist and be
writable and its current value read before anything is written; the files are written in
an order the kernel accepts (``cpu.idle`` last when it becomes 1, first when it becomes
0; the CFS period before the quota); on the first failed write every file already written
is restored, newest first, and :class:`CgroupError` names the path, file and value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bosun.errors import BosunError
from bosun.plugins.batch_resources import QoSClass

#: kubelet's CFS period (µs).
CFS_PERIOD_US = 100_000
#: kubelet's minimum CFS quota (µs).
MIN_QUOTA_US = 1000
#: kubelet's minimum cpu.shares.
MIN_SHARES = 2
#: KEP-2570 memory throttling factor.
MEMORY_THROTTLING_FACTOR = 0.9
PAGE_BYTES = 4096


class CgroupError(BosunError):
    """A cgroup path or file is missing or not writable, or a write failed (the previous
    values were restored)."""


class Version(StrEnum):
    """The cgroup hierarchy in use."""

    V1 = "v1"
    V2 = "v2"


class Level(StrEnum):
    """Where a group sits: a QoS root (``kubepods-besteffort``) or a pod."""

    QOS = "qos"
    POD = "pod"


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the controllers are mounted.

    Attributes:
        version: v1 or v2.
        cpu, memory, cpuacct: the roots of those controllers (all the same for v2).
    """

    version: Version
    cpu: Path
    memory: Path
    cpuacct: Path

    def roots(self) -> tuple[Path, ...]:
        """The distinct roots a group is created in."""
        out: list[Path] = []
        for p in (self.cpu, self.cpuacct, self.memory):
            if p not in out:
                out.append(p)
        return tuple(out)


def detect(root: Path | str = "/sys/fs/cgroup") -> Layout:
    """Detect the cgroup version under ``root``.

    Raises:
        CgroupError: neither a v2 tree with the cpu and memory controllers nor v1 mounts
            of ``cpu`` and ``memory`` (names the root and what is missing).
    """
    base = Path(root)
    controllers = base / "cgroup.controllers"
    if controllers.is_file():
        have = set(controllers.read_text().split())
        missing = {"cpu", "memory"} - have
        if missing:
            raise CgroupError(
                f"{base}: cgroup v2 tree without the {', '.join(sorted(missing))} controller(s)"
            )
        return Layout(Version.V2, base, base, base)
    cpu, mem, acct = base / "cpu", base / "memory", base / "cpuacct"
    if (cpu / "cpu.shares").is_file() and (mem / "memory.limit_in_bytes").is_file():
        if not (acct / "cpuacct.usage").is_file():
            acct = cpu
        return Layout(Version.V1, cpu, mem, acct)
    raise CgroupError(
        f"{base}: no cgroup v2 tree (cgroup.controllers) and no v1 cpu and memory mounts "
        f"({cpu}/cpu.shares, {mem}/memory.limit_in_bytes)"
    )


def own_groups(pid: int | str = "self") -> dict[str, str]:
    """The cgroup path of process ``pid`` per controller (``/proc/<pid>/cgroup``): v1
    controller names (``cpu``, ``cpuacct``, ``memory``, ...) and ``""`` for the v2 tree.

    Raises:
        CgroupError: the file cannot be read.
    """
    p = Path(f"/proc/{pid}/cgroup")
    try:
        text = p.read_text()
    except OSError as exc:
        raise CgroupError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctl in parts[1].split(",") if parts[1] else [""]:
            out[ctl] = parts[2]
    return out


def nested_layout(layout: Layout, pid: int | str = "self") -> Layout:
    """``layout`` with every controller root moved down to process ``pid``'s own group, so
    that groups made under it stay inside whatever limits that process runs in (a
    container's or a sandbox's memory group, say).

    Raises:
        CgroupError: ``/proc/<pid>/cgroup`` cannot be read.
    """
    own = own_groups(pid)

    def down(root: Path, ctl: str) -> Path:
        key = "" if layout.version is Version.V2 else ctl
        rel = own.get(key, "/").strip("/")
        return root / rel if rel else root

    return Layout(
        layout.version,
        down(layout.cpu, "cpu"),
        down(layout.memory, "memory"),
        down(layout.cpuacct, "cpuacct"),
    )


@dataclass(frozen=True, slots=True)
class PodResources:
    """A pod's resources as the agent applies them.

    Attributes:
        cpu_request_milli: CPU request (milli-CPU; batch-cpu for BE pods).
        cpu_limit_milli: CPU limit (milli-CPU), 0 for none.
        memory_request_bytes, memory_limit_bytes: bytes, 0 for none.
    """

    cpu_request_milli: int = 0
    cpu_limit_milli: int = 0
    memory_request_bytes: int = 0
    memory_limit_bytes: int = 0


def milli_to_shares(milli: int) -> int:
    """kubelet ``MilliCPUToShares``: ``milli * 1024 // 1000``, at least 2."""
    return max(MIN_SHARES, milli * 1024 // 1000)


def shares_to_weight(shares: int) -> int:
    """KEP-2254's cpu.shares -> cpu.weight: ``1 + (shares - 2) * 9999 // 262142``."""
    return 1 + (max(MIN_SHARES, shares) - 2) * 9999 // 262142


def milli_to_quota_us(milli: int, period_us: int = CFS_PERIOD_US) -> int:
    """kubelet ``MilliCPUToQuota``: ``milli * period / 1000`` µs, at least 1000."""
    return max(MIN_QUOTA_US, milli * period_us // 1000)


def pod_settings(
    qos: QoSClass, res: PodResources, version: Version, *, level: Level = Level.POD
) -> dict[tuple[str, str], str]:
    """The (controller, file) -> value settings of one group for its class.

    ``level`` QOS leaves out ``cpu.idle`` (see the module docstring). The controller is
    ``cpu`` or ``memory``; the mapping is ordered as it must be written.
    """
    be = qos is QoSClass.BE
    shares = MIN_SHARES if be else milli_to_shares(res.cpu_request_milli)
    quota = milli_to_quota_us(res.cpu_limit_milli) if res.cpu_limit_milli > 0 else -1
    idle = "1" if be else "0"
    out: dict[tuple[str, str], str] = {}
    if level is Level.POD and idle == "0":
        out[("cpu", "cpu.idle")] = idle
    if version is Version.V1:
        out[("cpu", "cpu.shares")] = str(shares)
        out[("cpu", "cpu.cfs_period_us")] = str(CFS_PERIOD_US)
        out[("cpu", "cpu.cfs_quota_us")] = str(quota)
    else:
        out[("cpu", "cpu.weight")] = str(shares_to_weight(shares))
        out[("cpu", "cpu.max")] = f"{quota if quota > 0 else 'max'} {CFS_PERIOD_US}"
    if level is Level.POD and idle == "1":
        out[("cpu", "cpu.idle")] = idle
    req, lim = res.memory_request_bytes, res.memory_limit_bytes
    if version is Version.V1:
        out[("memory", "memory.limit_in_bytes")] = str(lim) if lim > 0 else "-1"
        soft = "0" if be else (str(req) if req > 0 else "-1")
        out[("memory", "memory.soft_limit_in_bytes")] = soft
    else:
        hard = qos in (QoSClass.LSE, QoSClass.LSR, QoSClass.SYSTEM)
        out[("memory", "memory.min")] = str(req if hard else 0)
        out[("memory", "memory.low")] = str(req if qos is QoSClass.LS else 0)
        if lim > 0:
            high = req + int(MEMORY_THROTTLING_FACTOR * (lim - req))
            out[("memory", "memory.high")] = str(max(PAGE_BYTES, high // PAGE_BYTES * PAGE_BYTES))
        else:
            out[("memory", "memory.high")] = "max"
        out[("memory", "memory.max")] = str(lim) if lim > 0 else "max"
    return out


def qos_root_settings(
    qos: QoSClass, request_milli: int, version: Version
) -> dict[tuple[str, str], str]:
    """A QoS-level group's CPU weight, as kubelet's QoS container manager sets it:
    ``besteffort`` gets the minimum ``cpu.shares`` 2 (weight 1), ``burstable`` the shares
    of the sum of its pods' CPU requests (``request_milli``). Never ``cpu.idle``.

    Without this a BE pod's ``cpu.idle`` only ranks it below its siblings *inside* the
    besteffort group, which would still compete with burstable at equal weight.
    """
    shares = MIN_SHARES if qos is QoSClass.BE else milli_to_shares(request_milli)
    if version is Version.V1:
        return {("cpu", "cpu.shares"): str(shares)}
    return {("cpu", "cpu.weight"): str(shares_to_weight(shares))}


class CgroupExecutor:
    """Writes groups' settings under a layout, one group as one step.

    Args:
        layout: from :func:`detect` (or a test tree laid out the same way).
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def _root(self, controller: str) -> Path:
        if controller == "cpu":
            return self.layout.cpu
        if controller == "memory":
            return self.layout.memory
        if controller == "cpuacct":
            return self.layout.cpuacct
        raise CgroupError(f"unknown controller {controller!r}")

    def path(self, controller: str, group: str) -> Path:
        """The directory of ``group`` (a path relative to the controller root)."""
        rel = Path(group)
        if rel.is_absolute() or ".." in rel.parts:
            raise CgroupError(f"{group}: a group must be a relative path without '..'")
        return self._root(controller) / rel

    def create(self, group: str) -> None:
        """Create ``group`` (and its parents) in every controller root.

        Raises:
            CgroupError: a root is missing or mkdir fails (names the path).
        """
        for root in self.layout.roots():
            if not root.is_dir():
                raise CgroupError(f"{root}: cgroup root does not exist")
            target = root / group
            try:
                target.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CgroupError(f"{target}: cannot create the group: {exc.strerror}") from exc

    def remove(self, group: str) -> None:
        """Remove ``group`` and its child groups (deepest first) from every root.

        Raises:
            CgroupError: a group still has tasks or cannot be removed (names the path).
        """
        for root in self.layout.roots():
            top = root / group
            if not top.is_dir():
                continue
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for d in [*dirs, top]:
                try:
                    d.rmdir()
                except OSError as exc:
                    raise CgroupError(f"{d}: cannot remove the group: {exc.strerror}") from exc

    def read(self, controller: str, group: str, file: str) -> str:
        """The stripped text of one file.

        Raises:
            CgroupError: missing or unreadable (names the path).
        """
        p = self.path(controller, group) / file
        try:
            with p.open("r") as fh:
                return fh.read(4096).strip()
        except OSError as exc:
            raise CgroupError(f"{p}: cannot read: {exc.strerror or exc}") from exc

    def apply(
        self, group: str, settings: Mapping[tuple[str, str], str], *, level: Level = Level.POD
    ) -> dict[tuple[str, str], str]:
        """Write ``settings`` to ``group`` as one step; returns the previous values.

        Raises:
            CgroupError: ``cpu.idle`` asked for on a QoS-level group; a group directory or
                file that does not exist or is not writable (nothing is written); a write
                that fails (the files already written are restored, newest first; the
                message names the path, file, value and the kernel's reason).
        """
        if level is not Level.POD and any(f == "cpu.idle" for _, f in settings):
            raise CgroupError(
                f"{group}: cpu.idle may only be set on pod-level groups, never on a QoS root "
                "(the kernel then refuses cpu.shares writes)"
            )
        previous: dict[tuple[str, str], str] = {}
        for ctl, file in settings:
            d = self.path(ctl, group)
            if not d.is_dir():
                raise CgroupError(f"{d}: cgroup path does not exist")
            p = d / file
            if not p.exists():
                raise CgroupError(f"{p}: no such cgroup file")
            if not os.access(p, os.W_OK):
                raise CgroupError(f"{p}: not writable")
            previous[(ctl, file)] = self.read(ctl, group, file)
        written: list[tuple[str, str]] = []
        for key, value in settings.items():
            ctl, file = key
            p = self.path(ctl, group) / file
            try:
                _write(p, value)
            except OSError as exc:
                restore_errors = self._restore(group, written, previous)
                extra = (
                    f"; restoring failed for {', '.join(restore_errors)}" if restore_errors else ""
                )
                raise CgroupError(
                    f"{p}: writing {value!r} failed: {exc.strerror or exc}; "
                    f"{len(written)} earlier write(s) of this group restored{extra}"
                ) from exc
            written.append(key)
        return previous

    def _restore(
        self, group: str, written: list[tuple[str, str]], previous: Mapping[tuple[str, str], str]
    ) -> list[str]:
        failed: list[str] = []
        for ctl, file in reversed(written):
            old = _restorable(file, previous[(ctl, file)])
            try:
                _write(self.path(ctl, group) / file, old)
            except OSError:
                failed.append(file)
        return failed

    def add_process(self, group: str, pid: int) -> None:
        """Move process ``pid`` into ``group`` in every controller root.

        Raises:
            CgroupError: the write fails (names the path).
        """
        for root in self.layout.roots():
            p = root / group / "cgroup.procs"
            try:
                _write(p, str(pid))
            except OSError as exc:
                raise CgroupError(f"{p}: cannot move pid {pid}: {exc.strerror}") from exc

    def cpu_usage_ns(self, group: str) -> int:
        """Cumulative CPU time of ``group`` in nanoseconds (v1 ``cpuacct.usage``, v2
        ``cpu.stat`` ``usage_usec`` x 1000)."""
        if self.layout.version is Version.V1:
            return int(self.read("cpuacct", group, "cpuacct.usage"))
        for line in self.read("cpu", group, "cpu.stat").splitlines():
            k, _, v = line.partition(" ")
            if k == "usage_usec":
                return int(v) * 1000
        raise CgroupError(f"{self.path('cpu', group)}/cpu.stat: no usage_usec")

    def memory_usage_bytes(self, group: str) -> int:
        """Memory charged to ``group`` in bytes (v1 ``memory.usage_in_bytes``, v2
        ``memory.current``; both count page cache as well as anonymous memory).

        Raises:
            CgroupError: the file is missing or unreadable (names the path).
        """
        file = "memory.usage_in_bytes" if self.layout.version is Version.V1 else "memory.current"
        raw = self.read("memory", group, file)
        try:
            return int(raw)
        except ValueError as exc:
            raise CgroupError(f"{self.path('memory', group)}/{file}: {raw!r} is not bytes") from exc

    def memory_limit_bytes(self, group: str) -> int | None:
        """The hard memory limit of ``group`` in bytes (v1 ``memory.limit_in_bytes``, v2
        ``memory.max``); None when unlimited (v2 ``max``, v1 values of 2**62 and more,
        which is how the kernel reads back ``-1``).

        Raises:
            CgroupError: the file is missing or unreadable (names the path).
        """
        file = "memory.limit_in_bytes" if self.layout.version is Version.V1 else "memory.max"
        raw = self.read("memory", group, file)
        if raw == "max":
            return None
        try:
            v = int(raw)
        except ValueError as exc:
            raise CgroupError(f"{self.path('memory', group)}/{file}: {raw!r} is not bytes") from exc
        return None if v >= UNLIMITED_V1 or v < 0 else v


#: cgroup v1 reads an unlimited ``memory.limit_in_bytes`` back as ``PAGE_COUNTER_MAX`` pages
#: in bytes (9223372036854771712 on x86-64); any value from 2**62 up counts as unlimited.
UNLIMITED_V1 = 2**62


def restorable(file: str, old: str) -> str:
    """A value read back from ``file`` in a form the file accepts when written again
    (v1 reads an unlimited limit back as a huge number; it is written as ``-1``)."""
    return _restorable(file, old)


def _restorable(file: str, old: str) -> str:
    """A value read back in a form the file accepts when written."""
    if file == "memory.limit_in_bytes" and old.isdigit() and int(old) >= 2**62:
        return "-1"
    if file in ("memory.soft_limit_in_bytes",) and old.isdigit() and int(old) >= 2**62:
        return "-1"
    return old


def _write(path: Path, value: str) -> None:
    # one write(2) per value, unbuffered, as the kernel expects for cgroup files
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def set_cpu_quota(executor: CgroupExecutor, group: str, milli: int) -> None:
    """Cap ``group`` at ``milli`` milli-CPU (<= 0: no cap), the agent's squeeze knob.

    Raises:
        CgroupError: the write fails.
    """
    quota = milli_to_quota_us(milli) if milli > 0 else -1
    if executor.layout.version is Version.V1:
        settings = {("cpu", "cpu.cfs_quota_us"): str(quota)}
    else:
        settings = {("cpu", "cpu.max"): f"{quota if quota > 0 else 'max'} {CFS_PERIOD_US}"}
    executor.apply(group, settings)
