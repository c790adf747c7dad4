"""Reading manifests: kinds, formats, workload expansion, priority, and bad input.

Expected values follow Kubernetes' documented behaviour (API reference, defaulting and
validation rules, controller naming) and are worked out by hand for each fixture.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bosun.api.manifest import RANDOM_ALPHABET, load_manifest_text, load_manifests
from bosun.api.types import (
    ClusterObjects,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    NodeSelectorTerm,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
)
from bosun.errors import InputError, InputProblem

Mi = 1024**2
Gi = 1024**3
R = f"[{RANDOM_ALPHABET}]"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def load(tmp_path: Path, text: str, name: str = "m.yaml") -> ClusterObjects:
    return load_manifests([write(tmp_path, name, text)])


def problems(text: str, source: str = "m.yaml") -> tuple[InputProblem, ...]:
    with pytest.raises(InputError) as info:
        load_manifest_text(textwrap.dedent(text).lstrip(), source)
    return info.value.problems


def pod_yaml(spec: str, name: str = "p") -> str:
    """A Pod named ``name`` whose spec is the (flow- or block-style) YAML ``spec``."""
    body = textwrap.indent(textwrap.dedent(spec).strip(), "  ")
    return f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{body}\n"


ONE = "containers: [{name: c, image: nginx}]"

# --------------------------------------------------------------------------- Pod


FULL_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  namespace: shop
  uid: abc-123
  labels: {app: web, tier: front}
  annotations: {note: hello}
spec:
  schedulerName: my-scheduler
  nodeName: n1
  priority: 0
  preemptionPolicy: PreemptLowerPriority
  hostNetwork: false
  overhead: {cpu: 10m}
  nodeSelector: {disk: ssd}
  initContainers:
  - name: setup
    image: busybox
    resources: {requests: {cpu: 300m}}
  - name: proxy
    image: envoy
    restartPolicy: Always
    resources: {requests: {cpu: 50m, memory: 64Mi}}
  containers:
  - name: app
    image: nginx:1.25
    resources:
      requests: {cpu: 200m, memory: 128Mi}
      limits: {cpu: 500m, memory: 256Mi}
    ports:
    - {containerPort: 80, hostPort: 8080}
    - {containerPort: 53, protocol: UDP, hostIP: 10.0.0.1, hostPort: 53}
  tolerations:
  - {key: gpu, operator: Exists, effect: NoSchedule}
  - {key: dedicated, value: ml}
  - {operator: Exists}
  - {key: down, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  schedulingGates: [{name: example.com/quota}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: web-data}}
  - {name: scratch, ephemeral: {volumeClaimTemplate: {spec: {}}}}
  - {name: cfg, configMap: {name: cfg}}
"""


def test_pod_fields(tmp_path: Path) -> None:
    (pod,) = load(tmp_path, FULL_POD).pods
    assert (pod.name, pod.namespace, pod.uid, pod.key) == ("web-0", "shop", "abc-123", "shop/web-0")
    assert pod.labels == {"app": "web", "tier": "front"}
    assert pod.annotations == {"note": "hello"}
    assert (pod.scheduler_name, pod.node_name) == ("my-scheduler", "n1")
    # admission accepts explicit values equal to what it computes (no class: 0)
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (
        0,
        "",
        "PreemptLowerPriority",
    )
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.overhead == {"cpu": 10}
    assert [c.name for c in pod.init_containers] == ["setup", "proxy"]
    assert [c.restart_policy for c in pod.init_containers] == ["", "Always"]
    app = pod.containers[0]
    assert (app.name, app.image) == ("app", "nginx:1.25")
    assert app.requests == {"cpu": 200, "memory": 128 * Mi}
    assert app.limits == {"cpu": 500, "memory": 256 * Mi}
    assert app.ports == (
        ContainerPort(80, 8080, "TCP", ""),
        ContainerPort(53, 53, "UDP", "10.0.0.1"),
    )
    assert pod.images == ("nginx:1.25",)
    # app side: 200m + sidecar 50m = 250m; init peak: setup 300m alone (before the
    # sidecar); max 300m, plus 10m overhead = 310m. Memory: 128Mi + 64Mi.
    assert pod.requests == {"cpu": 310, "memory": 192 * Mi}
    assert pod.tolerations == (
        Toleration("gpu", "Exists", "", "NoSchedule"),
        Toleration("dedicated", "Equal", "ml", ""),
        Toleration("", "Exists", "", ""),
        Toleration("down", "Exists", "", "NoExecute", 30),
    )
    assert pod.scheduling_gates == ("example.com/quota",)
    assert pod.pvc_claims == ("web-data", "web-0-scratch")
    assert pod.owner == ""


def test_pod_defaults(tmp_path: Path) -> None:
    (pod,) = load(tmp_path, pod_yaml(ONE)).pods
    assert (pod.namespace, pod.uid) == ("default", "default/p")
    assert pod.scheduler_name == "default-scheduler"
    assert (pod.priority, pod.priority_class_name) == (0, "")
    assert pod.preemption_policy == "PreemptLowerPriority"
    assert pod.affinity is None
    assert pod.requests == {}
    assert (pod.nonzero_milli_cpu, pod.nonzero_memory_bytes) == (100, 200 * Mi)


def test_host_network_defaults_host_port(tmp_path: Path) -> None:
    spec = """
    hostNetwork: true
    containers: [{name: c, ports: [{containerPort: 9100}, {containerPort: 53, hostPort: 53}]}]
    """
    (pod,) = load(tmp_path, pod_yaml(spec)).pods
    assert [p.host_port for p in pod.containers[0].ports] == [9100, 53]


def test_owner_from_controller_reference(tmp_path: Path) -> None:
    text = """
    apiVersion: v1
    kind: Pod
    metadata:
      name: web-abc
      ownerReferences:
      - {apiVersion: apps/v1, kind: ReplicaSet, name: other}
      - {apiVersion: apps/v1, kind: ReplicaSet, name: web, controller: true}
    spec: {containers: [{name: c}]}
    """
    (pod,) = load(tmp_path, text).pods
    assert pod.owner == "ReplicaSet/web"


def test_generate_name(tmp_path: Path) -> None:
    doc = (
        "apiVersion: v1\nkind: Pod\nmetadata: {generateName: job-}\nspec: {containers: [{name: c}]}"
    )
    objs = load(tmp_path, f"{doc}\n---\n{doc}\n")
    names = [p.name for p in objs.pods]
    assert all(re.fullmatch(f"job-{R}{{5}}", n) for n in names)
    assert len(set(names)) == 2


def test_gpu_share_from_manifest(tmp_path: Path) -> None:
    spec = """
    containers:
    - name: c
      resources:
        limits: {nvidia.com/gpu: 2, alibabacloud.com/gpu-milli: 300}
    """
    (pod,) = load(tmp_path, pod_yaml(spec)).pods
    assert (pod.gpu_count, pod.gpu_milli) == (2, 300)


# --------------------------------------------------------------------------- affinity etc.

AFFINITY_POD = """
containers: [{name: c}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: zone, operator: In, values: [a, b]}
        - {key: cores, operator: Gt, values: ["8"]}
        - {key: spot, operator: DoesNotExist}
      - matchFields: [{key: metadata.name, operator: NotIn, values: [n9]}]
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 40
      preference: {matchExpressions: [{key: disk, operator: Exists}]}
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - labelSelector: {matchLabels: {app: cache}}
      topologyKey: topology.kubernetes.io/zone
      namespaces: [infra]
      matchLabelKeys: [version]
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        labelSelector:
          matchExpressions: [{key: app, operator: NotIn, values: [web]}]
        namespaceSelector: {}
        topologyKey: kubernetes.io/hostname
        mismatchLabelKeys: [tenant]
topologySpreadConstraints:
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: DoNotSchedule
  labelSelector: {matchLabels: {app: web}}
  minDomains: 3
  matchLabelKeys: [pod-template-hash]
- maxSkew: 2
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  nodeAffinityPolicy: Ignore
  nodeTaintsPolicy: Honor
"""


def test_affinity(tmp_path: Path) -> None:
    (pod,) = load(tmp_path, pod_yaml(AFFINITY_POD)).pods
    assert pod.affinity is not None
    node = pod.affinity.node_affinity
    assert node is not None and node.required is not None
    assert node.required == (
        NodeSelectorTerm(
            match_expressions=(
                Requirement("zone", "In", ("a", "b")),
                Requirement("cores", "Gt", ("8",)),
                Requirement("spot", "DoesNotExist"),
            )
        ),
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "NotIn", ("n9",)),)),
    )
    (pref,) = node.preferred
    assert pref.weight == 40
    assert pref.preference.match_expressions == (Requirement("disk", "Exists"),)

    assert pod.affinity.pod_affinity is not None
    (req,) = pod.affinity.pod_affinity.required
    assert req.label_selector == LabelSelector(match_labels=(("app", "cache"),))
    assert (req.topology_key, req.namespaces) == ("topology.kubernetes.io/zone", ("infra",))
    assert req.namespace_selector is None
    assert req.match_label_keys == ("version",)

    assert pod.affinity.pod_anti_affinity is not None
    (weighted,) = pod.affinity.pod_anti_affinity.preferred
    assert weighted.weight == 100
    term = weighted.term
    assert term.label_selector == LabelSelector(
        match_expressions=(Requirement("app", "NotIn", ("web",)),)
    )
    assert term.namespace_selector == LabelSelector()  # {}: every namespace
    assert term.mismatch_label_keys == ("tenant",)


def test_topology_spread(tmp_path: Path) -> None:
    (pod,) = load(tmp_path, pod_yaml(AFFINITY_POD)).pods
    first, second = pod.topology_spread_constraints
    assert (first.max_skew, first.topology_key, first.when_unsatisfiable) == (
        1,
        "topology.kubernetes.io/zone",
        "DoNotSchedule",
    )
    assert first.label_selector == LabelSelector(match_labels=(("app", "web"),))
    assert first.min_domains == 3
    # Defaults (KEP-3094): nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore.
    assert (first.node_affinity_policy, first.node_taints_policy) == ("Honor", "Ignore")
    assert first.match_label_keys == ("pod-template-hash",)
    assert second.label_selector is None
    assert second.min_domains is None
    assert (second.node_affinity_policy, second.node_taints_policy) == ("Ignore", "Honor")


# --------------------------------------------------------------------------- other kinds

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {kubernetes.io/hostname: gpu-1, zone: a}
spec:
  unschedulable: true
  taints:
  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
  - {key: maintenance, effect: NoExecute}
status:
  capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "250", ephemeral-storage: 1Ti}
  allocatable: {cpu: 63500m, memory: 500Gi, nvidia.com/gpu: "8"}
  images:
  - names: [nginx:1.25, docker.io/library/nginx@sha256:abc]
    sizeBytes: 187000000
"""


NODE_STATUS_CASES = [
    # (status yaml, expected allocatable): kube's SetDefaults_NodeStatus copies capacity
    # only when allocatable is absent (nil); nothing invents a pods count.
    ('capacity: {cpu: "4", pods: "10"}', {"cpu": 4000, "pods": 10}),
    ('capacity: {cpu: "4", pods: "10"}\n  allocatable: {cpu: "3"}', {"cpu": 3000}),
    ('capacity: {cpu: "4"}\n  allocatable: {}', {}),
    ('capacity: {cpu: "4"}', {"cpu": 4000}),
    ("{}", {}),
]


@pytest.mark.parametrize(
    ("status", "expected"),
    NODE_STATUS_CASES,
    ids=[
        "capacity-copied-when-allocatable-absent",
        "allocatable-given-capacity-ignored",
        "empty-allocatable-stays-empty",
        "no-pods-count-invented",
        "no-status",
    ],
)
def test_node_allocatable_defaulting(tmp_path: Path, status: str, expected: dict[str, int]) -> None:
    text = f"apiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nstatus:\n  {status}\n"
    (node,) = load(tmp_path, text).nodes
    assert node.allocatable == expected


def test_node(tmp_path: Path) -> None:
    (node,) = load(tmp_path, NODE).nodes
    assert node.name == "gpu-1"
    assert node.labels == {"kubernetes.io/hostname": "gpu-1", "zone": "a"}
    assert node.unschedulable is True
    assert node.taints == (
        Taint("nvidia.com/gpu", "present", TaintEffect.NO_SCHEDULE),
        Taint("maintenance", "", TaintEffect.NO_EXECUTE),
    )
    # allocatable is given, so capacity is ignored altogether (SetDefaults_NodeStatus).
    assert node.allocatable == {"cpu": 63500, "memory": 500 * Gi, "nvidia.com/gpu": 8}
    assert node.gpu_count == 8
    assert node.images == (
        ContainerImage(("nginx:1.25", "docker.io/library/nginx@sha256:abc"), 187_000_000),
    )


def test_node_no_pods_default(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4'}}\n"
    (node,) = load(tmp_path, text).nodes
    assert node.allocatable == {"cpu": 4000}  # no pods: kube invents no count
    assert (node.taints, node.unschedulable, node.labels) == ((), False, {})


def test_priority_class_pdb_namespace(tmp_path: Path) -> None:
    text = """
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: batch}
    value: 100
    globalDefault: true
    preemptionPolicy: Never
    ---
    apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: shop}
    spec:
      minAvailable: 50%
      selector: {matchLabels: {app: web}}
    ---
    apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: all}
    spec: {maxUnavailable: 0, selector: {}}
    ---
    apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: none}
    spec: {maxUnavailable: 1}
    ---
    apiVersion: v1
    kind: Namespace
    metadata: {name: shop, labels: {team: a}}
    """
    objs = load(tmp_path, text)
    (pc,) = objs.priority_classes
    assert (pc.name, pc.value, pc.global_default, pc.preemption_policy) == (
        "batch",
        100,
        True,
        "Never",
    )
    web, every, none = objs.pdbs
    assert (web.name, web.namespace, web.min_available, web.max_unavailable) == (
        "web",
        "shop",
        "50%",
        None,
    )
    assert web.selector == LabelSelector(match_labels=(("app", "web"),))
    assert (every.namespace, every.max_unavailable, every.selector) == (
        "default",
        0,
        LabelSelector(),
    )
    assert none.selector is None  # a nil selector selects no pods
    (ns,) = objs.namespaces
    # kube labels every namespace with its own name (kubernetes.io/metadata.name).
    assert ns.labels == {"team": "a", "kubernetes.io/metadata.name": "shop"}


SKIPPED = [
    ("Service", "v1", True, "Service default/x"),
    ("ConfigMap", "v1", True, "ConfigMap default/x"),
    ("ClusterRole", "rbac.authorization.k8s.io/v1", False, "ClusterRole x"),
    ("NetworkPolicy", "networking.k8s.io/v1", True, "NetworkPolicy default/x"),
    ("DaemonSet", "apps/v1", True, "DaemonSet default/x"),
    ("CustomResourceDefinition", "apiextensions.k8s.io/v1", False, "CustomResourceDefinition x"),
]


@pytest.mark.parametrize(
    ("kind", "api", "namespaced", "expected"), SKIPPED, ids=[s[0] for s in SKIPPED]
)
def test_skipped_kinds(
    tmp_path: Path, kind: str, api: str, namespaced: bool, expected: str
) -> None:
    objs = load(tmp_path, f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: x}}\n")
    assert objs.skipped == [expected]
    assert (objs.pods, objs.nodes) == ([], [])


def test_skipped_in_namespace(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: kube-system}\n"
    assert load(tmp_path, text).skipped == ["Secret kube-system/s"]


def test_extend_keeps_skipped() -> None:
    a = ClusterObjects(skipped=["Service default/a"])
    a.extend(ClusterObjects(skipped=["Service default/b"]))
    assert a.skipped == ["Service default/a", "Service default/b"]


# --------------------------------------------------------------------------- formats


def node_doc(name: str) -> str:
    return f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\n"


def test_multi_document_yaml(tmp_path: Path) -> None:
    text = f"---\n{node_doc('a')}---\n---\n{node_doc('b')}...\n---\n{node_doc('c')}---\n"
    assert [n.name for n in load(tmp_path, text).nodes] == ["a", "b", "c"]


def test_kind_list(tmp_path: Path) -> None:
    text = """
    apiVersion: v1
    kind: List
    items:
    - {apiVersion: v1, kind: Node, metadata: {name: n1}}
    - {apiVersion: v1, kind: Pod, metadata: {name: p1}, spec: {containers: [{name: c}]}}
    - {apiVersion: v1, kind: Service, metadata: {name: s1}}
    """
    objs = load(tmp_path, text)
    assert [n.name for n in objs.nodes] == ["n1"]
    assert [p.name for p in objs.pods] == ["p1"]
    assert objs.skipped == ["Service default/s1"]


def test_typed_list_items_without_kind(tmp_path: Path) -> None:
    # The API server's PodList items carry no kind/apiVersion of their own.
    text = """
    apiVersion: v1
    kind: PodList
    items:
    - {metadata: {name: a}, spec: {containers: [{name: c}]}}
    - {metadata: {name: b, namespace: x}, spec: {containers: [{name: c}]}}
    """
    assert [p.key for p in load(tmp_path, text).pods] == ["default/a", "x/b"]


def test_json_object_and_array(tmp_path: Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]},
    }
    single = load_manifests([write(tmp_path, "one.json", json.dumps(node))])
    assert [n.name for n in single.nodes] == ["n1"]
    both = load_manifests([write(tmp_path, "two.json", json.dumps([node, pod], indent=2))])
    assert [n.name for n in both.nodes] == ["n1"]
    assert both.pods[0].requests == {"cpu": 250}


def test_json_detected_from_content() -> None:
    objs = load_manifest_text(
        '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}', "-"
    )
    assert [n.name for n in objs.nodes] == ["n"]


def test_directory_and_file_order(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", node_doc("from-b"))
    write(
        tmp_path,
        "a.json",
        json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "from-a"}}),
    )
    write(tmp_path, "notes.txt", "not a manifest")
    objs = load_manifests([tmp_path])
    assert [n.name for n in objs.nodes] == ["from-a", "from-b"]


def test_yaml_booleans_and_dates() -> None:
    # kube reads YAML 1.1: `yes` is a boolean (so it is not a valid label value) while a
    # date-like value stays a string.
    text = "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {since: 2024-01-31}}\n"
    (node,) = load_manifest_text(text, "m.yaml").nodes
    assert node.labels == {"since": "2024-01-31"}


# --------------------------------------------------------------------------- workloads


def workload(kind: str, spec: str, name: str = "web", api: str = "apps/v1", ns: str = "") -> str:
    meta = f"{{name: {name}, namespace: {ns}}}" if ns else f"{{name: {name}}}"
    selector = "" if kind == "Job" else "  selector: {matchLabels: {app: web}}\n"
    body = textwrap.indent(textwrap.dedent(spec).strip(), "  ") + "\n" if spec.strip() else ""
    return (
        f"apiVersion: {api}\nkind: {kind}\nmetadata: {meta}\nspec:\n{body}{selector}"
        "  template:\n    metadata: {labels: {app: web}}\n"
        "    spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n"
    )


EXPANSION = [
    pytest.param("Deployment", "replicas: 3", 3, f"web-{R}{{10}}-{R}{{5}}", id="deployment"),
    pytest.param("Deployment", "", 1, f"web-{R}{{10}}-{R}{{5}}", id="deployment-default-1"),
    pytest.param("Deployment", "replicas: 0", 0, "", id="deployment-zero"),
    pytest.param("ReplicaSet", "replicas: 2", 2, f"web-{R}{{5}}", id="replicaset"),
    pytest.param("StatefulSet", "replicas: 3", 3, r"web-[0-2]", id="statefulset"),
    pytest.param("Job", "parallelism: 4\ncompletions: 2", 2, f"web-{R}{{5}}", id="job-capped"),
    pytest.param("Job", "completions: 5", 1, f"web-{R}{{5}}", id="job-default-parallelism"),
    pytest.param("Job", "parallelism: 3", 3, f"web-{R}{{5}}", id="job-no-completions"),
    pytest.param("Job", "parallelism: 3\nsuspend: true", 0, "", id="job-suspended"),
]


@pytest.mark.parametrize(("kind", "spec", "count", "pattern"), EXPANSION)
def test_workload_expansion(tmp_path: Path, kind: str, spec: str, count: int, pattern: str) -> None:
    api = "batch/v1" if kind == "Job" else "apps/v1"
    pods = load(tmp_path, workload(kind, spec, api=api, ns="shop")).pods
    assert len(pods) == count
    assert len({p.name for p in pods}) == count
    for pod in pods:
        assert re.fullmatch(pattern, pod.name), pod.name
        assert pod.namespace == "shop"
        assert pod.uid == f"shop/{pod.name}"
        assert pod.owner == f"{kind}/web"
        assert pod.labels["app"] == "web"
        assert pod.requests == {"cpu": 100}


def test_deployment_template_hash(tmp_path: Path) -> None:
    pods = load(tmp_path, workload("Deployment", "replicas: 2")).pods
    hashes = {p.name.split("-")[1] for p in pods}
    assert len(hashes) == 1
    assert all(p.labels["pod-template-hash"] == p.name.split("-")[1] for p in pods)


def test_statefulset_names_labels_and_claims(tmp_path: Path) -> None:
    spec = """
    replicas: 2
    ordinals: {start: 5}
    volumeClaimTemplates: [{metadata: {name: data}}, {metadata: {name: logs}}]
    """
    pods = load(tmp_path, workload("StatefulSet", spec, name="db")).pods
    assert [p.name for p in pods] == ["db-5", "db-6"]
    assert pods[0].labels == {
        "app": "web",
        "statefulset.kubernetes.io/pod-name": "db-5",
        "apps.kubernetes.io/pod-index": "5",
    }
    assert pods[1].pvc_claims == ("data-db-6", "logs-db-6")


def test_job_labels_and_indexed_names(tmp_path: Path) -> None:
    spec = "parallelism: 2\ncompletions: 4\ncompletionMode: Indexed"
    pods = load(tmp_path, workload("Job", spec, name="train", api="batch/v1")).pods
    assert [re.fullmatch(f"train-([0-9])-{R}{{5}}", p.name) is not None for p in pods] == [True] * 2
    assert [p.name.split("-")[1] for p in pods] == ["0", "1"]
    assert pods[1].labels == {
        "app": "web",
        "batch.kubernetes.io/job-name": "train",
        "job-name": "train",
        "batch.kubernetes.io/job-completion-index": "1",
    }


def test_expansion_is_deterministic(tmp_path: Path) -> None:
    text = (
        workload("Deployment", "replicas: 4")
        + "---\n"
        + workload("Job", "parallelism: 2", name="j", api="batch/v1")
    )
    first = [p.name for p in load(tmp_path, text, "a.yaml").pods]
    again = [p.name for p in load_manifest_text(text, "other-source.yaml").pods]
    assert first == again
    moved = [
        p.name for p in load(tmp_path, workload("ReplicaSet", "replicas: 4", ns="x"), "b.yaml").pods
    ]
    plain = [p.name for p in load(tmp_path, workload("ReplicaSet", "replicas: 4"), "c.yaml").pods]
    assert moved != plain  # the namespace is part of the seed


@settings(derandomize=True, max_examples=25, deadline=None)
@given(
    replicas=st.integers(min_value=0, max_value=60),
    kind=st.sampled_from(["Deployment", "ReplicaSet"]),
)
def test_expanded_names_unique_and_well_formed(replicas: int, kind: str) -> None:
    pods = load_manifest_text(workload(kind, f"replicas: {replicas}"), "m.yaml").pods
    names = [p.name for p in pods]
    assert len(names) == replicas == len(set(names))
    pattern = f"web-{R}{{10}}-{R}{{5}}" if kind == "Deployment" else f"web-{R}{{5}}"
    assert all(re.fullmatch(pattern, n) for n in names)


# --------------------------------------------------------------------------- priority

CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: -5
"""
DEFAULT_CLASS = """
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: normal}
value: 10
globalDefault: true
"""

PRIORITY = [
    pytest.param("priorityClassName: high", False, (1000, "high", "Never"), id="from-class"),
    pytest.param(
        "priorityClassName: low", False, (-5, "low", "PreemptLowerPriority"), id="negative"
    ),
    pytest.param(
        "priorityClassName: high\npriority: 1000",
        False,
        (1000, "high", "Never"),
        id="explicit-equal",
    ),
    pytest.param(
        "priorityClassName: high\npreemptionPolicy: Never",
        False,
        (1000, "high", "Never"),
        id="explicit-policy-equal",
    ),
    pytest.param("", True, (10, "normal", "PreemptLowerPriority"), id="global-default"),
    pytest.param("priorityClassName: high", True, (1000, "high", "Never"), id="named-over-default"),
    pytest.param("", False, (0, "", "PreemptLowerPriority"), id="no-class"),
    pytest.param(
        "priorityClassName: system-node-critical",
        False,
        (2_000_001_000, "system-node-critical", "PreemptLowerPriority"),
        id="builtin-system-class",
    ),
]


@pytest.mark.parametrize(("spec", "with_default", "expected"), PRIORITY)
def test_priority_resolution(
    tmp_path: Path, spec: str, with_default: bool, expected: tuple[int, str, str]
) -> None:
    text = CLASSES + (DEFAULT_CLASS if with_default else "") + "---\n" + pod_yaml(f"{ONE}\n{spec}")
    (pod,) = load(tmp_path, text).pods
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == expected


def test_priority_class_from_another_file_and_template(tmp_path: Path) -> None:
    deployment = workload("Deployment", "replicas: 2").replace(
        "spec: {containers", "spec: {priorityClassName: high, containers"
    )
    pods = load_manifests(
        [write(tmp_path, "w.yaml", deployment), write(tmp_path, "pc.yaml", CLASSES)]
    ).pods
    assert [(p.priority, p.preemption_policy) for p in pods] == [(1000, "Never")] * 2


# --------------------------------------------------------------------------- bad input

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
C0 = "spec.containers[0]"
RES = f"{C0}.resources"
TERM = f"spec.affinity.nodeAffinity.{REQ}.nodeSelectorTerms[0]"
AFF = f"spec.affinity.podAffinity.{REQ}[0]"
TSC = "spec.topologySpreadConstraints[0]"
TOL = "spec.tolerations[0]"


def res(resources: str) -> str:
    """A pod spec with one container whose ``resources`` is the flow-style ``resources``."""
    return f"containers: [{{name: c, resources: {resources}}}]"


def one(extra: str) -> str:
    """A pod spec with one plain container plus ``extra`` spec fields."""
    return f"{ONE}\n{extra}"


def node_term(term: str) -> str:
    return one(f"affinity: {{nodeAffinity: {{{REQ}: {{nodeSelectorTerms: [{term}]}}}}}}")


def exprs(requirement: str) -> str:
    return node_term(f"{{matchExpressions: [{requirement}]}}")


def fields(requirement: str) -> str:
    return node_term(f"{{matchFields: [{requirement}]}}")


def pod_term(term: str, kind: str = "podAffinity", which: str = REQ) -> str:
    return one(f"affinity: {{{kind}: {{{which}: [{term}]}}}}")


def spread(constraint: str) -> str:
    return one(f"topologySpreadConstraints: [{constraint}]")


def spread_ok(extra: str) -> str:
    return spread(f"{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, {extra}}}")


def tol(toleration: str) -> str:
    return one(f"tolerations: [{toleration}]")


GPU_MILLI = "alibabacloud.com/gpu-milli"

BAD_POD = [
    # (id, spec, field, message fragment); the object is always "Pod default/p".
    ("cpu-grammar", res("{requests: {cpu: 1.5.5}}"), f"{RES}.requests.cpu", "not a valid quantity"),
    ("memory-unit", res("{limits: {memory: 2GB}}"), f"{RES}.limits.memory", "not a valid quantity"),
    ("boolean-quantity", res("{requests: {cpu: true}}"), f"{RES}.requests.cpu", "number or string"),
    (
        "negative",
        res("{requests: {memory: -1Gi}}"),
        f"{RES}.requests.memory",
        "greater than or equal",
    ),
    (
        "request-over-limit",
        res("{requests: {cpu: 2}, limits: {cpu: 1}}"),
        f"{RES}.requests.cpu",
        "less than or equal to the cpu limit",
    ),
    (
        "extended-not-equal",
        res("{requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}"),
        f"{RES}.requests[nvidia.com/gpu]",
        "must be equal",
    ),
    (
        "extended-fraction",
        res("{requests: {nvidia.com/gpu: 0.5}}"),
        f"{RES}.requests[nvidia.com/gpu]",
        "must be an integer",
    ),
    (
        "gpu-milli-high",
        res(f"{{requests: {{{GPU_MILLI}: 1001}}}}"),
        f"{RES}.requests[{GPU_MILLI}]",
        "between 0 and 1000",
    ),
    ("non-standard", res("{requests: {gpu: 1}}"), f"{RES}.requests.gpu", "standard resource"),
    ("overhead-negative", one("overhead: {cpu: -1}"), "spec.overhead.cpu", "greater than or equal"),
    ("no-containers", "nodeName: n1", "spec.containers", "required"),
    ("containers-not-list", "containers: web", "spec.containers", "must be a list"),
    ("container-name-missing", "containers: [{image: nginx}]", f"{C0}.name", "required"),
    ("container-name-invalid", "containers: [{name: Web_1}]", f"{C0}.name", "RFC 1123"),
    (
        "container-name-duplicate",
        one("initContainers: [{name: c}]"),
        "spec.initContainers[0].name",
        "duplicate container name",
    ),
    (
        "protocol",
        "containers: [{name: c, ports: [{containerPort: 80, protocol: tcp}]}]",
        f"{C0}.ports[0].protocol",
        "unsupported value 'tcp'",
    ),
    (
        "port-range",
        "containers: [{name: c, ports: [{containerPort: 70000}]}]",
        f"{C0}.ports[0].containerPort",
        "between 1 and 65535",
    ),
    (
        "port-missing",
        "containers: [{name: c, ports: [{hostPort: 80}]}]",
        f"{C0}.ports[0].containerPort",
        "required",
    ),
    (
        "host-network-port",
        "hostNetwork: true\ncontainers: [{name: c, ports: [{containerPort: 80, hostPort: 81}]}]",
        f"{C0}.ports[0].hostPort",
        "must match containerPort",
    ),
    (
        "init-restart-policy",
        one("initContainers: [{name: i, restartPolicy: Never}]"),
        "spec.initContainers[0].restartPolicy",
        "unsupported value 'Never'",
    ),
    ("tol-empty-key", tol("{operator: Equal, value: x}"), f"{TOL}.operator", "must be Exists"),
    ("tol-exists-value", tol("{key: a, operator: Exists, value: b}"), f"{TOL}.value", "be empty"),
    ("tol-effect", tol("{key: a, effect: NoRun}"), f"{TOL}.effect", "unsupported value 'NoRun'"),
    ("tol-operator", tol("{key: a, operator: Equals}"), f"{TOL}.operator", "unsupported value"),
    (
        "tol-seconds",
        tol("{key: a, effect: NoSchedule, tolerationSeconds: 5}"),
        f"{TOL}.effect",
        "must be 'NoExecute'",
    ),
    ("tol-key", tol("{key: 'bad key', operator: Exists}"), f"{TOL}.key", "alphanumerics"),
    ("node-selector-bool", one("nodeSelector: {ssd: true}"), "spec.nodeSelector.ssd", "a string"),
    (
        "gt-not-integer",
        exprs("{key: a, operator: Gt, values: [x]}"),
        f"{TERM}.matchExpressions[0].values",
        "must be an integer",
    ),
    (
        "lt-two-values",
        exprs("{key: a, operator: Lt, values: ['1', '2']}"),
        f"{TERM}.matchExpressions[0].values",
        "single value",
    ),
    (
        "in-no-values",
        exprs("{key: a, operator: In}"),
        f"{TERM}.matchExpressions[0].values",
        "must be specified",
    ),
    (
        "exists-with-values",
        exprs("{key: a, operator: Exists, values: [x]}"),
        f"{TERM}.matchExpressions[0].values",
        "may not be specified",
    ),
    (
        "node-operator",
        exprs("{key: a, operator: Like, values: [x]}"),
        f"{TERM}.matchExpressions[0].operator",
        "unsupported value 'Like'",
    ),
    (
        "match-fields-key",
        fields("{key: metadata.labels, operator: In, values: [x]}"),
        f"{TERM}.matchFields[0].key",
        "metadata.name",
    ),
    (
        "match-fields-operator",
        fields("{key: metadata.name, operator: Exists}"),
        f"{TERM}.matchFields[0].operator",
        "unsupported value 'Exists'",
    ),
    (
        "match-fields-values",
        fields("{key: metadata.name, operator: In, values: [a, b]}"),
        f"{TERM}.matchFields[0].values",
        "only one value",
    ),
    (
        "no-terms",
        one(f"affinity: {{nodeAffinity: {{{REQ}: {{nodeSelectorTerms: []}}}}}}"),
        f"spec.affinity.nodeAffinity.{REQ}.nodeSelectorTerms",
        "at least one node selector term",
    ),
    (
        "node-weight",
        one(f"affinity: {{nodeAffinity: {{{PREF}: [{{weight: 0, preference: {{}}}}]}}}}"),
        f"spec.affinity.nodeAffinity.{PREF}[0].weight",
        "range 1-100",
    ),
    (
        "pod-weight",
        pod_term("{weight: 101, podAffinityTerm: {topologyKey: zone}}", "podAntiAffinity", PREF),
        f"spec.affinity.podAntiAffinity.{PREF}[0].weight",
        "range 1-100",
    ),
    ("topology-key", pod_term("{labelSelector: {}}"), f"{AFF}.topologyKey", "required"),
    (
        "match-label-keys-no-selector",
        pod_term("{topologyKey: zone, matchLabelKeys: [v]}"),
        f"{AFF}.matchLabelKeys",
        "labelSelector is not set",
    ),
    (
        "match-label-keys-in-selector",
        pod_term("{topologyKey: zone, labelSelector: {matchLabels: {v: x}}, matchLabelKeys: [v]}"),
        f"{AFF}.matchLabelKeys[0]",
        "exists in both",
    ),
    (
        "match-mismatch-overlap",
        pod_term(
            "{topologyKey: z, labelSelector: {}, matchLabelKeys: [v], mismatchLabelKeys: [v]}"
        ),
        f"{AFF}.mismatchLabelKeys",
        "both matchLabelKeys and mismatchLabelKeys",
    ),
    (
        "label-selector-gt",
        pod_term("{topologyKey: z, labelSelector: {matchExpressions: [{key: a, operator: Gt}]}}"),
        f"{AFF}.labelSelector.matchExpressions[0].operator",
        "unsupported value 'Gt'",
    ),
    (
        "spread-max-skew",
        spread("{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"),
        f"{TSC}.maxSkew",
        "greater than zero",
    ),
    (
        "spread-topology-key",
        spread("{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}"),
        f"{TSC}.topologyKey",
        "required",
    ),
    (
        "spread-when",
        spread("{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Never}"),
        f"{TSC}.whenUnsatisfiable",
        "unsupported value 'Never'",
    ),
    (
        "spread-when-missing",
        spread("{maxSkew: 1, topologyKey: zone}"),
        f"{TSC}.whenUnsatisfiable",
        "required",
    ),
    ("spread-min-domains", spread_ok("minDomains: 0"), f"{TSC}.minDomains", "greater than 0"),
    (
        "spread-min-domains-anyway",
        spread("{maxSkew: 1, topologyKey: z, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}"),
        f"{TSC}.minDomains",
        "DoNotSchedule",
    ),
    (
        "spread-policy",
        spread_ok("nodeTaintsPolicy: Respect"),
        f"{TSC}.nodeTaintsPolicy",
        "unsupported value 'Respect'",
    ),
    (
        "spread-duplicate",
        spread(
            "{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule}, "
            "{maxSkew: 2, topologyKey: z, whenUnsatisfiable: DoNotSchedule}"
        ),
        "spec.topologySpreadConstraints[1]",
        "duplicate",
    ),
    (
        "gate-duplicate",
        one("schedulingGates: [{name: a}, {name: a}]"),
        "spec.schedulingGates[1].name",
        "duplicate scheduling gate",
    ),
    ("gate-missing", one("schedulingGates: [{}]"), "spec.schedulingGates[0].name", "required"),
    ("preemption-policy", one("preemptionPolicy: Always"), "spec.preemptionPolicy", "unsupported"),
    ("priority-type", one("priority: high"), "spec.priority", "must be an integer"),
    ("unknown-class", one("priorityClassName: gold"), "spec.priorityClassName", "no PriorityClass"),
    (
        "claim-missing",
        one("volumes: [{name: v, persistentVolumeClaim: {}}]"),
        "spec.volumes[0].persistentVolumeClaim.claimName",
        "required",
    ),
]


@pytest.mark.parametrize(
    ("spec", "field", "fragment"), [c[1:] for c in BAD_POD], ids=[c[0] for c in BAD_POD]
)
def test_bad_pod(spec: str, field: str, fragment: str) -> None:
    found = problems(pod_yaml(spec))
    assert any(
        p.source == "m.yaml"
        and p.obj == "Pod default/p"
        and p.field == field
        and fragment in p.message
        for p in found
    ), [str(p) for p in found]


def _node(extra: str) -> str:
    return "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n" + extra


def pc(body: str, name: str = "a") -> str:
    return (
        f"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\n{body}"
    )


def pdb(spec: str) -> str:
    return (
        f"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: a}}\nspec: {spec}\n"
    )


def meta_node(meta: str) -> str:
    return f"apiVersion: v1\nkind: Node\nmetadata: {meta}\n"


DEPLOY = workload("Deployment", "")
MATCH_WEB = "{app: web}}\n  template"
PDB = "PodDisruptionBudget default/a"

BAD_OBJECTS = [
    # (id, manifest, object, field, message fragment)
    ("missing-kind", "apiVersion: v1\nmetadata: {name: x}\n", "document 1", "kind", "required"),
    (
        "unknown-kind",
        "apiVersion: v1\nkind: Widget\nmetadata: {name: x}\n",
        "Widget default/x",
        "kind",
        "unknown kind 'Widget'",
    ),
    ("not-an-object", "just text\n", "document 1", "", "must be a Kubernetes object"),
    (
        "wrong-api-version",
        DEPLOY.replace("apps/v1", "apps/v1beta1"),
        "Deployment default/web",
        "apiVersion",
        "must be 'apps/v1'",
    ),
    ("missing-api-version", "kind: Node\nmetadata: {name: n1}\n", "Node n1", "apiVersion", "'v1'"),
    ("no-name", meta_node("{labels: {a: b}}"), "document 1", "metadata.name", "required"),
    ("bad-name", pod_yaml(ONE, name="Web_1"), "Pod default/Web_1", "metadata.name", "RFC 1123"),
    (
        "bad-namespace",
        pod_yaml(ONE).replace("name: p", "name: p\n  namespace: Shop"),
        "Pod Shop/p",
        "metadata.namespace",
        "RFC 1123",
    ),
    (
        "label-value",
        meta_node("{name: n1, labels: {app: 'a b'}}"),
        "Node n1",
        "metadata.labels.app",
        "alphanumerics",
    ),
    (
        "label-key",
        meta_node("{name: n1, labels: {-app: a}}"),
        "Node n1",
        "metadata.labels[-app]",
        "alphanumeric",
    ),
    (
        "label-not-string",
        meta_node("{name: n1, labels: {ready: yes}}"),
        "Node n1",
        "metadata.labels.ready",
        "must be a string",
    ),
    (
        "taint-no-effect",
        _node("spec: {taints: [{key: a}]}"),
        "Node n1",
        "spec.taints[0].effect",
        "required",
    ),
    (
        "taint-effect",
        _node("spec: {taints: [{key: a, effect: Evict}]}"),
        "Node n1",
        "spec.taints[0].effect",
        "unsupported value 'Evict'",
    ),
    (
        "taint-no-key",
        _node("spec: {taints: [{effect: NoSchedule}]}"),
        "Node n1",
        "spec.taints[0].key",
        "required",
    ),
    (
        "taint-duplicate",
        _node(
            "spec: {taints: [{key: a, effect: NoSchedule}, {key: a, value: b, effect: NoSchedule}]}"
        ),
        "Node n1",
        "spec.taints[1].effect",
        "unique by key and effect",
    ),
    (
        "allocatable-invalid",
        _node("status: {allocatable: {cpu: lots}}"),
        "Node n1",
        "status.allocatable.cpu",
        "not a valid quantity",
    ),
    (
        "capacity-negative",
        _node("status: {capacity: {memory: -1}}"),
        "Node n1",
        "status.capacity.memory",
        "greater than or equal to 0",
    ),
    (
        "unschedulable-type",
        _node("spec: {unschedulable: 'yes'}"),
        "Node n1",
        "spec.unschedulable",
        "must be a boolean",
    ),
    ("pc-no-value", pc(""), "PriorityClass a", "value", "required"),
    (
        "pc-too-high",
        pc("value: 1000000001"),
        "PriorityClass a",
        "value",
        "no greater than 1000000000",
    ),
    (
        "pc-policy",
        pc("value: 1\npreemptionPolicy: Sometimes"),
        "PriorityClass a",
        "preemptionPolicy",
        "unsupported value",
    ),
    (
        "pc-two-defaults",
        pc("value: 1\nglobalDefault: true\n") + "---\n" + pc("value: 2\nglobalDefault: true", "b"),
        "PriorityClass b",
        "globalDefault",
        "already marked as default",
    ),
    ("pdb-both", pdb("{minAvailable: 1, maxUnavailable: 1}"), PDB, "spec", "cannot be both set"),
    ("pdb-neither", pdb("{selector: {}}"), PDB, "spec", "one of minAvailable or maxUnavailable"),
    ("pdb-percent", pdb("{minAvailable: 150%}"), PDB, "spec.minAvailable", "100%"),
    ("pdb-string", pdb("{maxUnavailable: half}"), PDB, "spec.maxUnavailable", "percentage"),
    ("pdb-negative", pdb("{maxUnavailable: -1}"), PDB, "spec.maxUnavailable", "greater than or"),
    (
        "namespace-name",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: my.ns}\n",
        "Namespace my.ns",
        "metadata.name",
        "RFC 1123 label",
    ),
    (
        "deployment-no-selector",
        DEPLOY.replace("  selector: {matchLabels: {app: web}}\n", ""),
        "Deployment default/web",
        "spec.selector",
        "required",
    ),
    (
        "deployment-selector-mismatch",
        DEPLOY.replace(MATCH_WEB, "{app: db}}\n  template"),
        "Deployment default/web",
        "spec.template.metadata.labels",
        "does not match",
    ),
    (
        "replicaset-empty-selector",
        workload("ReplicaSet", "").replace("{matchLabels: {app: web}}", "{}"),
        "ReplicaSet default/web",
        "spec.selector",
        "empty selector",
    ),
    (
        "negative-replicas",
        workload("StatefulSet", "replicas: -1"),
        "StatefulSet default/web",
        "spec.replicas",
        "greater than or equal to 0",
    ),
    (
        "job-parallelism",
        workload("Job", "parallelism: -2", api="batch/v1"),
        "Job default/web",
        "spec.parallelism",
        "greater than or equal to 0",
    ),
    (
        "template-quantity",
        DEPLOY.replace("cpu: 100m", "cpu: 100mm"),
        "Deployment default/web",
        "spec.template.spec.containers[0].resources.requests.cpu",
        "not a valid quantity",
    ),
    (
        "template-unknown-class",
        DEPLOY.replace("spec: {containers", "spec: {priorityClassName: x, containers"),
        "Deployment default/web",
        "spec.template.spec.priorityClassName",
        "no PriorityClass",
    ),
    ("list-items", "apiVersion: v1\nkind: List\nitems: {a: 1}\n", "document 1", "items", "a list"),
    (
        "list-item-problem",
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node}\n",
        "document 1 items[0]",
        "metadata.name",
        "required",
    ),
    (
        "duplicate-pod",
        pod_yaml(ONE) + "---\n" + pod_yaml(ONE),
        "Pod default/p",
        "metadata.name",
        "duplicate Pod default/p",
    ),
    ("duplicate-node", _node("---\n") + _node(""), "Node n1", "metadata.name", "duplicate Node n1"),
    (
        "duplicate-expanded-pod",
        workload("StatefulSet", "replicas: 2", name="db") + "---\n" + pod_yaml(ONE, name="db-1"),
        "Pod default/db-1",
        "metadata.name",
        "duplicate Pod default/db-1",
    ),
]


@pytest.mark.parametrize(
    ("text", "obj", "field", "fragment"),
    [c[1:] for c in BAD_OBJECTS],
    ids=[c[0] for c in BAD_OBJECTS],
)
def test_bad_object(text: str, obj: str, field: str, fragment: str) -> None:
    found = problems(text)
    assert any(p.obj == obj and p.field == field and fragment in p.message for p in found), [
        str(p) for p in found
    ]


PARSE_ERRORS = [
    # (id, file name, text, object, message fragment)
    (
        "yaml-flow",
        "m.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: [n1}\n",
        "document 1",
        "line 3",
    ),
    (
        "yaml-second-doc",
        "m.yaml",
        node_doc("a") + "---\nkind: Node\n  bad: indent\n",
        "document 2",
        "line 6",
    ),
    (
        "yaml-duplicate-key",
        "m.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  name: b\n",
        "document 1",
        "line 5",
    ),
    (
        "json-comma",
        "m.json",
        '{\n  "apiVersion": "v1",\n  "kind": "Node"\n  "metadata": {"name": "n1"}\n}\n',
        "document 1",
        "line 4",
    ),
    (
        "json-duplicate-key",
        "m.json",
        '{"kind": "Node", "kind": "Pod"}',
        "document 1",
        "duplicate key 'kind'",
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "obj", "fragment"),
    [c[1:] for c in PARSE_ERRORS],
    ids=[c[0] for c in PARSE_ERRORS],
)
def test_parse_errors(tmp_path: Path, name: str, text: str, obj: str, fragment: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(InputError) as info:
        load_manifests([path])
    assert any(
        p.source == str(path) and p.obj == obj and fragment in p.message
        for p in info.value.problems
    ), [str(p) for p in info.value.problems]


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as info:
        load_manifests([missing])
    (problem,) = info.value.problems
    assert problem.source == str(missing)
    assert "cannot read" in problem.message


def test_all_problems_reported_together(tmp_path: Path) -> None:
    a = write(
        tmp_path,
        "a.yaml",
        pod_yaml("containers: [{name: c, resources: {requests: {cpu: 1.5.5}}}]", name="bad-pod")
        + "---\n"
        + _node("spec: {taints: [{key: a, effect: Sometimes}]}\n")
        + "---\n"
        + pod_yaml(ONE, name="fine"),
    )
    b = write(
        tmp_path,
        "b.yaml",
        workload("Deployment", "replicas: 2").replace(
            "{app: web}}\n  template", "{app: db}}\n  template"
        )
        + "---\napiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n"
        + "---\n"
        + pod_yaml(ONE, name="fine"),
    )
    with pytest.raises(InputError) as info:
        load_manifests([a, b, tmp_path / "gone.yaml"])
    got = {(p.source, p.obj, p.field) for p in info.value.problems}
    assert got == {
        (str(a), "Pod default/bad-pod", "spec.containers[0].resources.requests.cpu"),
        (str(a), "Node n1", "spec.taints[0].effect"),
        (str(b), "Deployment default/web", "spec.template.metadata.labels"),
        (str(b), "Gadget default/g", "kind"),
        (str(b), "Pod default/fine", "metadata.name"),
        (str(tmp_path / "gone.yaml"), "file", ""),
    }
    message = str(info.value)
    assert message.startswith("6 problems in the input:")
    assert "duplicate Pod default/fine" in message


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"], ids=["succeeded", "failed"])
def test_terminated_pods_hold_nothing(tmp_path: Path, phase: str) -> None:
    # kube-scheduler's cache drops pods in a terminal phase: they do not take capacity.
    path = tmp_path / "done.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: done}\n"
        "spec: {nodeName: n1, containers: [{name: c, image: busybox}]}\n"
        f"status: {{phase: {phase}}}\n"
    )
    objects = load_manifests([path])
    assert objects.pods == []
    assert objects.skipped == [f"Pod default/done (phase {phase})"]


def test_owner_selector_is_the_controllers_selector(tmp_path: Path) -> None:
    # kube-scheduler's default spreading selects the pods of the owning ReplicaSet or
    # StatefulSet (helper.DefaultSelector): their spec.selector, not the pod's own labels
    # (a StatefulSet pod's labels include its unique pod-name). Jobs have none.
    path = tmp_path / "w.yaml"
    path.write_text(
        textwrap.dedent("""
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: s}
        spec:
          replicas: 1
          selector: {matchLabels: {a: b}}
          template:
            metadata: {labels: {a: b}}
            spec: {containers: [{name: c, image: x}]}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: d}
        spec:
          replicas: 1
          selector: {matchLabels: {app: d}}
          template:
            metadata: {labels: {app: d}}
            spec: {containers: [{name: c, image: x}]}
        ---
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j}
        spec:
          template:
            metadata: {labels: {app: j}}
            spec: {restartPolicy: Never, containers: [{name: c, image: x}]}
    """)
    )
    pods = {p.owner: p for p in load_manifests([path]).pods}
    assert pods["StatefulSet/s"].owner_selector == LabelSelector(match_labels=(("a", "b"),))
    dep = pods["Deployment/d"]
    pod_hash = dep.labels["pod-template-hash"]
    assert dep.owner_selector == LabelSelector(
        match_labels=(("app", "d"), ("pod-template-hash", pod_hash))
    )
    assert pods["Job/j"].owner_selector is None


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        (
            "priorityClassName: high\npriority: 3",
            "spec.priority",
            "the integer value of priority (3) must not be provided in pod spec; priority "
            "admission controller computed 1000",
        ),
        ("priority: 7", "spec.priority", "computed 0 from the given PriorityClass name"),
        (
            "priorityClassName: high\npreemptionPolicy: PreemptLowerPriority",
            "spec.preemptionPolicy",
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided",
        ),
    ],
    ids=["priority-differs-from-class", "priority-without-class", "policy-differs-from-class"],
)
def test_priority_admission_rejects_values_the_class_contradicts(
    tmp_path: Path, spec: str, field: str, fragment: str
) -> None:
    # plugin/pkg/admission/priority: explicit values must equal the computed ones.
    path = write(tmp_path, "p.yaml", CLASSES + "---\n" + pod_yaml(f"{ONE}\n{spec}"))
    with pytest.raises(InputError) as info:
        load_manifests([path])
    (problem,) = info.value.problems
    assert problem.field == field
    assert fragment in problem.message


def test_workload_too_large_to_expand_is_a_problem_not_a_hang(tmp_path: Path) -> None:
    text = textwrap.dedent("""
        apiVersion: batch/v1
        kind: Job
        metadata: {name: huge}
        spec:
          parallelism: 100000000
          template:
            spec: {restartPolicy: Never, containers: [{name: c, image: x}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: Bad_Name}
        spec: {containers: [{name: c, image: x}]}
    """)
    with pytest.raises(InputError) as info:
        load_manifests([write(tmp_path, "w.yaml", text)])
    fields = {(p.obj, p.field) for p in info.value.problems}
    assert ("Job default/huge", "spec.parallelism") in fields
    assert any("Bad_Name" in p.obj or "Bad_Name" in p.message for p in info.value.problems)
