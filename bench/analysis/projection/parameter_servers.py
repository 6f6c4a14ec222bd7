"""Parameter servers on a cluster of hosts of several devices, variable by variable.

- Placement: each variable lives whole on one ps task, as replica_device_setter places
  them: round-robin in creation order (its default), or each on the least-loaded task by
  bytes ("balanced": tf_cnn_benchmarks' GreedyLoadBalancingStrategy). One large tensor
  (VGG-16's fc6, 411 MB) thus loads one task, however many there are.
- Who pushes: every device as a worker of its own, or (host-aggregated) one worker per host
  that first sums its devices' gradients over PCIe, as tf_cnn_benchmarks' workers of several
  GPUs do.
- A step reads every variable first, then pushes the gradients. Its reads are asked for at
  once when it starts (no read waits on anything), and it reads nothing again until every
  push of the step is in: SyncReplicasOptimizer's token, tf_cnn_benchmarks' barrier at the
  step's end (`add_sync_queues_and_barrier`), so no pull hides behind a push.
- A variable's pull is E copies of its bytes out of its ps task (E pushers); the task's
  process moves them at gRPC's rate, and those to other hosts also cross its host's link at
  the link's rate. A task serves its pulls side by side, an even share each (processor
  sharing): a small variable arrives early, the largest last, and a layer's forward pass
  waits only for its own variables. A push is the same the other way, each taken when its
  gradient is ready, in that order. The task's one process does the work of every push and
  every pull (its rate is measured with both), at the rate it has serving that many pushers at once
  where the profile measured it with several (Transport.concurrency_share), and at the share of it
  the profile measured beside a busy CPU where a task shares its host with a worker whose device is
  that CPU (Transport.rate_share_computing).
- A ps on a worker host (colocated) shares that host's link with the host's own workers:
  every host's link carries, each way, what its workers send to tasks elsewhere plus what
  its task receives from workers elsewhere, a bound on the exchange.
- An embedding table's step pushes the touched rows with their indices and the ids, and pulls
  the touched rows back (Tensor.push_bytes, .pull_bytes): far less than the table.
- Synchronous: the step ends when every push has ended, the gradients ready when the
  slowest device's are (Cluster.slowest), and the host's own per-step work (Cluster.other_s)
  after it.
  Asynchronous: no worker waits for another; updates per second are capped by the
  workers (E / their own step) and by each task (its rate over its bytes per update).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from dataclasses import dataclass

from bench.analysis.projection.cluster import Cluster, StepTerms
from bench.analysis.projection.transports import Transport
from bench.run.models.tensors import ModelTensors, Tensor

ROUND_ROBIN, BALANCED = "round-robin", "balanced"
PLACEMENTS = (ROUND_ROBIN, BALANCED)


def place(tensors: ModelTensors, tasks: int, policy: str) -> list[int]:
    """The ps task of each tensor, in creation order."""
    if policy == ROUND_ROBIN:
        return [i % tasks for i in range(len(tensors.tensors))]
    load = [0] * tasks
    out = []
    for t in tensors.tensors:
        task = min(range(tasks), key=load.__getitem__)
        load[task] += t.nbytes
        out.append(task)
    return out


@dataclass(frozen=True)
class Layout:
    """Who pushes and where the ps tasks are."""

    cluster: Cluster
    tasks: int
    colocated: bool  # task k on worker host k % hosts; else each on a host of its own
    aggregated: bool  # one pusher per host, after summing its devices' gradients
    # (each device's host, each task's host): tasks placed as given, as `--hosts` wraps a run's tasks over
    # fewer hosts (bench.run.launch.ssh_hosts.wrapped); None: as `colocated` and the devices per host say
    on: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    @functools.cached_property
    def hosts(self) -> int:
        return max((*self.on[0], *self.on[1])) + 1 if self.on else self.cluster.hosts

    @functools.cached_property
    def _devices_by_host(self) -> dict[int, int]:
        return dict(Counter(self.on[0])) if self.on else {}

    def pushers_on(self, host: int) -> int:
        devices = self._devices_by_host.get(host, 0) if self.on else self.cluster.devices_on(host)
        return min(1, devices) if self.aggregated else devices

    @functools.cached_property
    def pushers(self) -> int:
        return sum(self.pushers_on(h) for h in self.tasks_on) + sum(
            pushers * hosts for pushers, hosts in self.hosts_without_tasks.items())

    def host_of(self, task: int) -> int | None:
        if self.on:
            return self.on[1][task]
        return task % self.cluster.hosts if self.colocated else None

    @functools.cached_property
    def tasks_on(self) -> dict[int, tuple[int, ...]]:
        """host -> the tasks on it (hosts with none left out)."""
        out: dict[int, list[int]] = {}
        for k, host in enumerate(self.on[1] if self.on else map(self.host_of, range(self.tasks))):
            if host is not None:
                out.setdefault(host, []).append(k)
        return {host: tuple(tasks) for host, tasks in out.items()}

    @functools.cached_property
    def tasks_alone(self) -> tuple[int, ...]:
        """The tasks each on a host of its own, with no pusher."""
        return tuple(k for k in range(self.tasks) if self.host_of(k) is None)

    @functools.cached_property
    def hosts_without_tasks(self) -> dict[int, int]:
        """{pushers: hosts} of the hosts with pushers and no task: alike hosts, whose links carry the same,
        counted without visiting each (every host is full but the last)."""
        if self.on:
            return dict(Counter(self.pushers_on(h) for h in self._devices_by_host if h not in self.tasks_on))
        last = self.hosts - 1
        full = 1 if self.aggregated else self.cluster.devices_per_host
        out = Counter({full: self.hosts - len(self.tasks_on) - (last not in self.tasks_on)})
        if last not in self.tasks_on:
            out[self.pushers_on(last)] += 1
        return {pushers: hosts for pushers, hosts in out.items() if pushers and hosts}

    def computing_beside(self, task: int) -> bool:
        """The task shares its host's CPU with a worker whose device is that CPU (Cluster.on_host)."""
        host = self.host_of(task)
        return self.cluster.on_host and host is not None and self.pushers_on(host) > 0

    def remote_pushers(self, task: int) -> int:
        host = self.host_of(task)
        return self.pushers - (self.pushers_on(host) if host is not None else 0)

    @property
    def examples_per_push(self) -> int:
        return self.cluster.batch_size * (self.cluster.devices_per_host if self.aggregated else 1)


def _copy_s(nbytes: float, transport: Transport, layout: Layout, tensors: int = 1, computing: bool = False) -> float:
    """A task's process's work on one pusher's copy of `tensors` variables of `nbytes` in all, one
    way, while it serves every pusher of `layout` at once on a host of the cluster's cores (`computing`:
    beside a busy CPU on its host): the bytes at its rate then, and a message per tensor."""
    rate = transport.message_rate(nbytes / tensors, layout.pushers, computing, layout.cluster.cores_per_host)
    return (nbytes / rate if rate else 0.0) + tensors * transport.message_s


def _process_s(layout: Layout, task: int, nbytes: float, transport: Transport) -> float:
    """The task's process's work for one push (or pull) of a variable, of every pusher, all at once."""
    computing = layout.computing_beside(task)
    return layout.pushers * _copy_s(nbytes, transport, layout, computing=computing)


def _link_s(layout: Layout, task: int, nbytes: float, transport: Transport) -> float:
    """One push (or pull) of `nbytes` on the task's host's link, one direction: the remote pushers' copies."""
    return layout.remote_pushers(task) * nbytes / transport.network_bytes_per_s(layout.cluster.link_gbit)


def _pulls_done_s(layout: Layout, task: int, variables: list[Tensor], transport: Transport) -> list[float]:
    """When each of the task's variables has reached every pusher, all asked for at once at the
    step's start and served side by side (an even share each of the task's process and of its
    link's outbound direction, as processor sharing): a small one arrives early, the largest last."""
    demand = [max(_process_s(layout, task, t.pull_bytes, transport), _link_s(layout, task, t.pull_bytes, transport))
              for t in variables]
    done = [0.0] * len(demand)
    finished = 0.0  # the demand of those already done
    order = sorted(range(len(demand)), key=demand.__getitem__)
    for k, i in enumerate(order):
        done[i] = finished + (len(order) - k) * demand[i]
        finished += demand[i]
    return done


def _pushes_end_s(layout: Layout, task: int, variables: list[tuple[float, Tensor]], transport: Transport) -> float:
    """Each variable's push once its gradient is ready, taking the task's process and its link's
    inbound direction, in ready order: when the task's last push ends."""
    process_free = inbound_free = pushed = 0.0
    for ready, tensor in variables:
        work = _process_s(layout, task, tensor.push_bytes, transport)
        wire = _link_s(layout, task, tensor.push_bytes, transport)
        start = max(ready, process_free, inbound_free)
        pushed = start + max(work, wire)
        process_free, inbound_free = start + work, start + wire
    return pushed


def _per_task(tensors: ModelTensors, tasks_of: list[int], tasks: int) -> tuple[list[float], list[float], list[int]]:
    """(bytes pushed, bytes pulled, tensors) of one pusher's step, per task."""
    pushed, pulled, count = [0.0] * tasks, [0.0] * tasks, [0] * tasks
    for task, t in zip(tasks_of, tensors.tensors, strict=True):
        pushed[task] += t.push_bytes
        pulled[task] += t.pull_bytes
        count[task] += 1
    return pushed, pulled, count


def _host_link(pushers_here: int, everyone: int, total: float, here: float) -> tuple[float, float]:
    """The link rule: one host's link carries, one way, what its `pushers_here` pushers send to the tasks
    elsewhere, and the other way what its tasks (holding `here` of each pusher's `total` bytes) take from
    the `everyone - pushers_here` pushers elsewhere. Returns (the first, the second)."""
    return pushers_here * (total - here), (everyone - pushers_here) * here


def _link_bytes(layout: Layout, sent: list[float]) -> list[tuple[float, float]]:
    """Per host link, its two directions (_host_link) for one pusher's `sent` bytes per task: the hosts with
    tasks, then one of each alike host without a task, then each task on a host of its own: linear in the
    tasks, whatever the hosts."""
    total, everyone = sum(sent), layout.pushers
    out = [_host_link(layout.pushers_on(host), everyone, total, sum(sent[k] for k in mine))
           for host, mine in layout.tasks_on.items()]
    out += [_host_link(pushers, everyone, total, 0.0) for pushers in sorted(layout.hosts_without_tasks)]
    return out + [_host_link(0, everyone, total, sent[k]) for k in layout.tasks_alone]


def _links_bound_s(layout: Layout, pushed: list[float], pulled: list[float],
                   transport: Transport) -> tuple[float, float]:
    """(pulls, pushes): the busiest host link's bytes in its busier direction, at the link's rate
    (`pushed`, `pulled`: one pusher's bytes per task)."""
    net = transport.network_bytes_per_s(layout.cluster.link_gbit)
    pulls, pushes = (max(max(pair) for pair in _link_bytes(layout, sent)) / net for sent in (pulled, pushed))
    return pulls, pushes


def _aggregation_s(layout: Layout, nbytes: int) -> float:
    """A host's devices' gradients summed over PCIe before one copy leaves (0 per device)."""
    g = layout.cluster.devices_per_host
    return nbytes * g / layout.cluster.intra_host_bytes_per_s if layout.aggregated and g > 1 else 0.0


@dataclass(frozen=True)
class _Timeline:
    """One task's part of a step: when each of its variables has been read by every pusher (the step
    starting at 0) with where in the forward pass it is needed, and when its last push ends after the
    forward pass ends (the pushes follow the backward pass, so they move with the forward pass's end)."""

    arrivals: tuple[tuple[float, float], ...]  # (read by every pusher, share of the forward pass before it)
    pushed_after: float

    @functools.cached_property
    def last(self) -> float:
        return max(done for done, _ in self.arrivals)

    def forward_end_s(self, stretch: float, latency_s: float, forward_s: float) -> float:
        """The earliest the forward pass can end for this task's variables, their reads `stretch` times as long."""
        return max(done * stretch + latency_s + ready * forward_s for done, ready in self.arrivals)


def _timelines(tensors: ModelTensors, layout: Layout, tasks_of: list[int],
               transport: Transport) -> dict[int, _Timeline]:
    """Each task's timeline on `layout`, whose cluster is the one the step sees (Cluster.slowest)."""
    cluster = layout.cluster
    by_task: dict[int, list[Tensor]] = {}
    for task, t in zip(tasks_of, tensors.tensors, strict=True):
        by_task.setdefault(task, []).append(t)
    out = {}
    for task, variables in by_task.items():
        pulled = _pulls_done_s(layout, task, variables, transport)
        ready = sorted(((t.ready * cluster.backward_s + _aggregation_s(layout, t.nbytes), t) for t in variables),
                       key=lambda pair: pair[0])
        out[task] = _Timeline(tuple((done, t.ready) for done, t in zip(pulled, variables, strict=True)),
                              _pushes_end_s(layout, task, ready, transport))
    return out


def _stretch(last: float, pulls_bound: float) -> float:
    """How much longer the reads take than the tasks' timelines say: the busiest link's time for them over the
    last read's (1 where no link is busier than the tasks)."""
    return pulls_bound / last if last and pulls_bound > last else 1.0


def _step_end_s(forward_end_s: float, pushed_after: float, pushes_bound: float, cluster: Cluster,
                transport: Transport) -> float:
    """When a synchronous step's last push ends: the forward pass ends when its variables allow
    (`forward_end_s`, a layer waiting for its own variables and the layers after it taking the rest of the
    pass) and no sooner than it takes; the backward pass, the pushes after it (`pushed_after`) and the links'
    time for them (`pushes_bound`) follow; then one message's latency."""
    forward_end = max(cluster.forward_s, forward_end_s)
    return forward_end + max(cluster.backward_s, pushes_bound, pushed_after) + transport.latency_s


def synchronous_step(tensors: ModelTensors, layout: Layout, placement: str, transport: Transport) -> StepTerms:
    mean = layout.cluster
    cluster = mean.slowest()
    layout = dataclasses.replace(layout, cluster=cluster)
    tasks_of = place(tensors, layout.tasks, placement)
    pushed, pulled, _ = _per_task(tensors, tasks_of, layout.tasks)
    timelines = _timelines(tensors, layout, tasks_of, transport).values()
    pulls_bound, pushes_bound = _links_bound_s(layout, pushed, pulled, transport)
    stretch = _stretch(max(t.last for t in timelines), pulls_bound)
    forward_end = max(t.forward_end_s(stretch, transport.latency_s, cluster.forward_s) for t in timelines)
    end = _step_end_s(forward_end, max(t.pushed_after for t in timelines), pushes_bound, cluster, transport)
    return StepTerms.of(end + cluster.other_s, mean.compute_s, waiting_s=cluster.compute_s - mean.compute_s,
                        other_s=cluster.other_s)


class _Largest:
    """Named per-task figures, and the largest of each over the tasks outside a given set, found in the
    order sorted once (the tasks beside a pusher are few: the first outside them is near the front)."""

    def __init__(self, figures: dict[str, list[float]]) -> None:
        self.figures = figures
        self.order = {name: sorted(range(len(v)), key=v.__getitem__, reverse=True) for name, v in figures.items()}

    def outside(self, name: str, without: set[int]) -> float:
        values = self.figures[name]
        return next((values[i] for i in self.order[name] if i not in without), 0.0)


@dataclass(frozen=True)
class _OnePusher:
    """A pusher with no other pusher, every task holding its variables each on a host of its own (`remote`)
    or on the pusher's host (`near`): its step for any set of tasks beside it is the synchronous step of that
    one-pusher layout (tests/test_cluster_projection.py pins the two), made from the two timelines of each
    task, computed once, instead of building the layout for each set."""

    cluster: Cluster  # the one pusher's (Cluster.slowest)
    transport: Transport
    remote: list[_Timeline]  # by task
    near: dict[int, _Timeline]  # by task, where some set puts a task beside the pusher
    # of the remote timelines' figures and the pusher's bytes per task ("pushed", "pulled"), over the tasks not
    # beside the pusher
    largest: _Largest

    @functools.cached_property
    def _net_bytes_per_s(self) -> float:
        return self.transport.network_bytes_per_s(self.cluster.link_gbit)

    @functools.cached_property
    def _totals(self) -> dict[str, float]:
        return {name: sum(self.largest.figures[name]) for name in ("pushed", "pulled")}

    def link_s(self, name: str, beside: set[int]) -> float:
        """The busiest host link one way (_host_link) for the bytes `name` ("pushed" or "pulled"): the pusher's
        host's carrying the pusher's bytes to the tasks elsewhere, or a remote task's host's carrying that task's
        bytes; the tasks beside it leave both."""
        sent, total = self.largest.figures[name], self._totals[name]
        pusher_host = _host_link(1, 1, total, sum(sent[i] for i in beside))[0]
        a_task_host = _host_link(0, 1, total, self.largest.outside(name, beside))[1]
        return max(pusher_host, a_task_host) / self._net_bytes_per_s

    def step_s(self, beside: set[int]) -> float:
        near = [self.near[i] for i in beside]
        latency_s, forward_s = self.transport.latency_s, self.cluster.forward_s
        last = max([self.largest.outside("last", beside), *(t.last for t in near)])
        stretch = _stretch(last, self.link_s("pulled", beside))
        if stretch == 1.0:
            forward_end = max([self.largest.outside("forward_end", beside),
                               *(t.forward_end_s(1.0, latency_s, forward_s) for t in near)])
        else:
            forward_end = max(t.forward_end_s(stretch, latency_s, forward_s)
                              for t in near + [t for i, t in enumerate(self.remote) if i not in beside])
        pushed_after = max([self.largest.outside("pushed_after", beside), *(t.pushed_after for t in near)])
        return _step_end_s(forward_end, pushed_after, self.link_s("pushed", beside), self.cluster,
                           self.transport) + self.cluster.other_s


def _one_pusher_layout(cluster: Cluster, tasks: int, beside: set[int]) -> Layout:
    """One pusher on host 0 with the tasks `beside` it, every other task on a host of its own."""
    return Layout(cluster, tasks, False, False, ((0,), tuple(0 if i in beside else 1 + i for i in range(tasks))))


def _alone_steps_s(tensors: ModelTensors, layout: Layout, besides: set[tuple[int, ...]], tasks_of: list[int],
                   transport: Transport) -> dict[tuple[int, ...], float]:
    """A pusher's own step with no other pusher, for each set of tasks `beside` it on its host: its reads
    and pushes, over its host's link to the tasks elsewhere (each on a host of its own) and not to a task
    beside it. Only the tasks that hold variables take part (the others move nothing)."""
    holding = sorted(set(tasks_of))
    index = {task: i for i, task in enumerate(holding)}
    compact = [index[task] for task in tasks_of]
    cluster = dataclasses.replace(layout.cluster, workers=1, devices_per_host=1).slowest()
    remote = _timelines(tensors, _one_pusher_layout(cluster, len(holding), set()), compact, transport)
    remote_list = [remote[i] for i in range(len(holding))]
    everywhere = set(range(len(holding)))
    near = _timelines(tensors, _one_pusher_layout(cluster, len(holding), everywhere), compact, transport) \
        if any(besides) else {}
    pushed, pulled, _ = _per_task(tensors, compact, len(holding))
    largest = _Largest({"last": [t.last for t in remote_list], "pushed_after": [t.pushed_after for t in remote_list],
                        "forward_end": [t.forward_end_s(1.0, transport.latency_s, cluster.forward_s)
                                        for t in remote_list], "pushed": pushed, "pulled": pulled})
    pusher = _OnePusher(cluster, transport, remote_list, near, largest)
    return {key: pusher.step_s({index[task] for task in key}) for key in besides}


def _duplex_round_s(layout: Layout, pushed: list[float], pulled: list[float], transport: Transport) -> float:
    """Every pusher's update once (`pushed`, `pulled`: one pusher's bytes per task) on the busiest host
    link, whose two directions carry at once what leaves the host (its pushers' pushes to tasks
    elsewhere, its tasks' reads to remote pushers) and what reaches it (the reverse)."""
    net = transport.network_bytes_per_s(layout.cluster.link_gbit)
    pairs = zip(_link_bytes(layout, pushed), _link_bytes(layout, pulled), strict=True)
    most = max(max(ours_push + theirs_pull, ours_pull + theirs_push)
               for (ours_push, theirs_push), (ours_pull, theirs_pull) in pairs)
    return most / net if most else 0.0


def asynchronous_rate(tensors: ModelTensors, layout: Layout, placement: str,
                      transport: Transport) -> tuple[float, StepTerms]:
    """(examples/s, one pusher's step): each pusher alone on the links, capped by the tasks."""
    extra = _aggregation_s(layout, tensors.nbytes) if layout.aggregated else 0.0
    tasks_of = place(tensors, layout.tasks, placement)
    holding = set(tasks_of)
    # a pusher alone moves the same on every host whose tasks holding variables are the same: once each
    pushing = [(tuple(k for k in mine if k in holding), layout.pushers_on(h)) for h, mine in layout.tasks_on.items()]
    pushing += [((), pushers * hosts) for pushers, hosts in layout.hosts_without_tasks.items()]
    own = {key: step_s + extra for key, step_s in
           _alone_steps_s(tensors, layout, {key for key, pushers in pushing if pushers}, tasks_of, transport).items()}
    pushed, pulled, count = _per_task(tensors, tasks_of, layout.tasks)
    # per update a task's process takes in and sends out its bytes (both its work)
    work = [_copy_s(pushed[k], transport, layout, count[k], layout.computing_beside(k))
            + _copy_s(pulled[k], transport, layout, count[k], layout.computing_beside(k))
            for k in range(layout.tasks) if count[k]]
    links_s = _duplex_round_s(layout, pushed, pulled, transport)
    cap = min([1.0 / w for w in work if w > 0] + ([layout.pushers / links_s] if links_s else []), default=math.inf)
    updates = min(sum(pushers / own[key] for key, pushers in pushing if pushers), cap)
    step_s = layout.pushers / updates
    return updates * layout.examples_per_push, StepTerms.of(step_s, layout.cluster.compute_s,
                                                            other_s=layout.cluster.other_s)


def coordinated(rate: float, terms: StepTerms, cluster: Cluster, function_s: float,
                steps_per_function: int) -> tuple[float, StepTerms]:
    """ps-async's rate, at most what one coordinator schedules (TensorFlow 2's ClusterCoordinator): a
    function of `steps_per_function` steps per `function_s` (both the profile's); the workers then wait for it."""
    cap = steps_per_function * cluster.batch_size / function_s
    if rate <= cap:
        return rate, terms
    step_s = cluster.workers * cluster.batch_size / cap
    return cap, StepTerms.of(step_s, terms.compute_s, waiting_s=step_s - terms.step_s, other_s=terms.other_s)
