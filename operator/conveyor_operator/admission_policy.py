"""The ValidatingAdmissionPolicy of ``connectors.conveyor.dev`` (issue 28): what the CRD's own
rules cannot refuse at admission, refused by the API server naming each field, in the words of
:mod:`conveyor.manifest` and :mod:`conveyor.spark_security`:

* ``spec.config.<key>``: a ``${secret:`` or ``${configmap:`` that does not begin a whole
  ``${secret|configmap:<name>:<key>}`` with ``<name>`` a Kubernetes name
  (:data:`conveyor.manifest.K8S_NAME`) and ``<key>`` a Secret or ConfigMap key
  (:data:`conveyor.manifest.MOUNTED_KEY`); a key ending in one of
  :data:`conveyor.manifest.CODE_LOADING_CLIENT_PROPERTIES`. The CRD cannot say these:
  ``spec.config`` keeps unknown fields, which its CEL rules may not read.
* ``spec.spark.sparkConf.<key>``: a key that neither :data:`conveyor.spark_security.ALLOWED` nor
  the chart's ``connectors.allowedSparkConf`` matches (the CRD is the same for every
  installation and cannot know the latter); ``-Dspark.`` in a
  :data:`~conveyor.spark_security.JAVA_OPTIONS_KEYS` value. The operator's own properties and
  Spark's RPC security are the CRD's (:func:`conveyor.spark_security.admission_rules`).

The operator and the driver check all of this again (the API server may lack the API, or the
chart value ``admissionPolicy.enabled`` be false). On UPDATE only a changed ``spec`` is checked,
so that a Connector stored before the policy can still lose its finalizer.

Cost: the API server (1.36) accepts the policy's estimated cost without a ``maxProperties`` on
``spec.config``. At run time only values holding ``${secret:``/``${configmap:`` are matched, each
candidate on its own: about 700 kB of such values passed (1024 keys of 600 characters with a
reference each; values without references cost little up to the 3 MiB request limit), 1.6 MB
of them exceeded the per-expression budget, which refuses the Connector ("actual cost limit
exceeded": the policy fails closed).

fnmatch globs become RE2 regular expressions (:func:`glob_regex`) the way the chart's helper
``conveyor.allowedSparkConfRegexes`` converts the platform's: Go's ``regexp.QuoteMeta``, then
``*`` as ``.*`` (any characters, dots and newlines too, as fnmatch's) and ``?`` as ``.``,
anchored. Character classes (``[...]``) are not supported: :func:`glob_regex` raises on them and
the chart's values schema refuses ``[`` and ``]``.

``python -m conveyor_operator.crd --write`` (or this module's ``--write``) regenerates
:data:`TEMPLATE`; a unit test fails when it drifts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from conveyor import manifest, spark_security
from conveyor_operator import GROUP, PLURAL, VERSION

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = REPO_ROOT / "charts" / "conveyor" / "templates" / "operator" / "connector-admission-policy.yaml"

_GO_QUOTED = set("\\.+*?()|[]{}^$")  # what Go's regexp.QuoteMeta escapes (Sprig's regexQuoteMeta)
_NAME = "__POLICY_NAME__"
_LABELS = "__LABELS__"
_PLATFORM = "__PLATFORM_SPARK_CONF__"


def glob_regex(glob: str) -> str:
    """An RE2 regular expression (also Python's) matching exactly the strings the fnmatch glob
    matches case-sensitively (:func:`fnmatch.fnmatchcase`): ``*`` any characters, ``?`` one.

    Raises:
        ValueError: the glob holds ``[`` or ``]`` (fnmatch's character classes are not supported).
    """
    if "[" in glob or "]" in glob:
        raise ValueError(f"{glob!r}: character classes ([...]) are not supported in sparkConf globs")
    quoted = "".join("\\" + c if c in _GO_QUOTED else c for c in glob)
    return "^(?s:" + quoted.replace("\\*", ".*").replace("\\?", ".") + ")$"


def allowed_regex(globs: tuple[str, ...] = spark_security.ALLOWED) -> str:
    """One RE2 regular expression matching what any of ``globs`` matches (:func:`glob_regex`)."""
    return "^(?s:" + "|".join(glob_regex(g)[len("^(?s:"):-len(")$")] for g in globs) + ")$"


def _unanchored(pattern: str) -> str:
    assert pattern.startswith("^") and pattern.endswith("$"), pattern
    return pattern[1:-1]


REFERENCE_START = r"\$\{(?:secret|configmap):"
REFERENCE_CANDIDATE = REFERENCE_START + r"[^$}]*\}?"
"""Each ``${secret:`` or ``${configmap:`` of a value up to the next ``}`` (included) or ``$``."""
REFERENCE = (REFERENCE_START + "(?:" + _unanchored(manifest.K8S_NAME) + "):(?:"
             + _unanchored(manifest.MOUNTED_KEY) + r")\}")
"""A reference with a Kubernetes name and a Secret or ConfigMap key: what each
:data:`REFERENCE_CANDIDATE` must be, whole. (Matched candidate by candidate, not over the whole
value: the cost of a regular expression in CEL grows with the length of the text times its own.)"""
REFERENCE_RULE = ("a ${secret:<name>:<key>} or ${configmap:<name>:<key>} reference needs <name> a Kubernetes "
                  "object name and <key> " + manifest.MOUNTED_KEY_RULE)


def _cel(text: str) -> str:
    """A CEL string literal of ``text``."""
    if not text.isascii() or not text.isprintable():
        raise ValueError(f"not printable ASCII: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _cel_raw(pattern: str) -> str:
    """A CEL raw string literal (no escapes) of a regular expression."""
    if '"' in pattern or not pattern.isascii() or not pattern.isprintable():
        raise ValueError(f"cannot be a raw CEL string: {pattern!r}")
    return 'r"' + pattern + '"'


def _cel_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(_cel(i) for i in items) + "]"


def _config_keys(condition: str) -> str:
    return f"has(object.spec.config) ? object.spec.config.filter(k, {condition}) : []"


def _spark_conf_keys(condition: str) -> str:
    return ("has(object.spec.spark) && has(object.spec.spark.sparkConf) ? "
            f"object.spec.spark.sparkConf.filter(k, {condition}) : []")


def _named(variable: str, field: str, reason: str) -> str:
    """A messageExpression naming each key of ``variables.<variable>``: ``<field>.<key>: <reason>``."""
    return f'variables.{variable}.map(k, {_cel(field + ".")} + k + ": " + {reason}).join("; ")'


def policy_spec() -> dict[str, Any]:
    """The policy's ``spec``; ``variables.platformSparkConf`` (a CEL list of the platform's
    regular expressions) is the chart's to render."""
    suffixes = _cel_list(manifest.CODE_LOADING_CLIENT_PROPERTIES)
    code_loading = f'{suffixes}.exists(s, k == s || k.endsWith("." + s))'
    before, after = manifest.CODE_LOADING_REASON.split("{property}")
    value = "object.spec.config[k]"
    candidate, whole = _cel_raw(REFERENCE_CANDIDATE), _cel_raw("^" + REFERENCE + "$")
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [GROUP], "apiVersions": [VERSION], "operations": ["CREATE", "UPDATE"],
            "resources": [PLURAL],
        }]},
        "matchConditions": [{
            "name": "spec-created-or-changed",
            "expression": 'request.operation == "CREATE" || !has(oldObject.spec) || !has(object.spec) '
                          "|| object.spec != oldObject.spec",
        }],
        "variables": [
            {"name": "platformSparkConf", "expression": _PLATFORM},
            {"name": "codeLoadingConfig", "expression": _config_keys(code_loading)},
            {"name": "badReferenceConfig", "expression": _config_keys(
                f"type({value}) == string && ({value}.contains({_cel('${secret:')}) || "
                f"{value}.contains({_cel('${configmap:')})) && !{value}.findAll({candidate}).all(r, r.matches({whole}))")},
            {"name": "notAllowedSparkConf", "expression": _spark_conf_keys(
                f"!k.matches({_cel_raw(allowed_regex())}) && !variables.platformSparkConf.exists(p, k.matches(p))")},
            {"name": "sparkJavaOptions", "expression": _spark_conf_keys(
                f"k in {_cel_list(spark_security.JAVA_OPTIONS_KEYS)} && "
                f"object.spec.spark.sparkConf[k].contains({_cel(spark_security.SPARK_JAVA_OPTION)})")},
        ],
        "validations": [
            {"expression": "size(variables.badReferenceConfig) == 0", "reason": "Invalid",
             "messageExpression": _named("badReferenceConfig", "spec.config", _cel(REFERENCE_RULE))},
            {"expression": "size(variables.codeLoadingConfig) == 0", "reason": "Invalid",
             "messageExpression": _named(
                 "codeLoadingConfig", "spec.config",
                 f'{_cel(before)} + {suffixes}.filter(s, k == s || k.endsWith("." + s))[0] + {_cel(after)}')},
            {"expression": "size(variables.notAllowedSparkConf) == 0", "reason": "Invalid",
             "messageExpression": _named("notAllowedSparkConf", "spec.spark.sparkConf",
                                         _cel(spark_security.NOT_ALLOWED))},
            {"expression": "size(variables.sparkJavaOptions) == 0", "reason": "Invalid",
             "messageExpression": _named("sparkJavaOptions", "spec.spark.sparkConf",
                                         _cel(spark_security.JAVA_OPTIONS_SET_SPARK))},
        ],
    }


_HEADER = """\
{{- /*
Generated by `python -m conveyor_operator.crd --write` from conveyor.manifest and
conveyor.spark_security (conveyor_operator.admission_policy); do not edit.
What the Connector CRD cannot refuse at admission: ${secret|configmap:...} references that are not
a Kubernetes name and key, librdkafka properties that load code, sparkConf keys outside the
built-in allow-list and connectors.allowedSparkConf. Bound where the operator watches.
*/}}
{{- if and .Values.admissionPolicy.enabled (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") }}
"""

_BINDING = """\
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: __POLICY_NAME__
  labels: __LABELS__
spec:
  policyName: __POLICY_NAME__
  validationActions: [Deny]
  {{- with .Values.watchNamespaces }}
  matchResources:
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: In
          values: {{ toJson . }}
  {{- end }}
{{- end }}
"""


def render() -> str:
    """The chart template :data:`TEMPLATE`."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": _NAME, "labels": _LABELS},
        "spec": policy_spec(),
    }
    generated = yaml.safe_dump(policy, sort_keys=False, width=120)
    if "{{" in generated:
        raise ValueError("a generated expression holds '{{', which Helm would read as an action")
    body = generated + _BINDING
    return _HEADER + (body.replace(_NAME, '{{ include "conveyor.connectorPolicyName" . }}')
                      .replace(f"labels: {_LABELS}", 'labels:\n    {{- include "conveyor.labels" . | nindent 4 }}')
                      .replace(_PLATFORM, '{{ include "conveyor.allowedSparkConfRegexes" . | toJson }}'))


def write() -> Path:
    TEMPLATE.write_text(render())
    return TEMPLATE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the chart template instead of printing")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write(render())
        return 0
    print(f"wrote {write().relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
