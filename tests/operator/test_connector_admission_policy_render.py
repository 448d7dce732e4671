"""The chart's Connector ValidatingAdmissionPolicy is what the models generate, and its regular
expressions decide as the models do (fnmatch for sparkConf globs, conveyor.manifest for
${secret|configmap:...} references). The API server's behaviour is tests/kube/test_admission_policy.py."""

import re
from fnmatch import fnmatchcase

import pytest
from conveyor_operator import admission_policy

from conveyor import spark_security
from conveyor.manifest import CODE_LOADING_CLIENT_PROPERTIES, ConnectorSpec, ManifestError


def test_committed_template_matches_the_models():
    assert admission_policy.TEMPLATE.read_text() == admission_policy.render(), (
        f"{admission_policy.TEMPLATE} drifted from the models: run `python -m conveyor_operator.crd --write`")


def _python(regex: str) -> re.Pattern[str]:
    # RE2's $ (no m flag) is the end of the text; Python's also matches before a final newline
    assert regex.endswith("$")
    return re.compile(regex[:-1] + r"\Z")


GLOBS = [*spark_security.ALLOWED, "spark.jars.packages", "spark.eventLog.*", "spark.*.*JavaOptions", "spark.?x",
         "spark.kubernetes.driver.label.team/*", "a+b(c)|d$e^f{1}", "*"]
KEYS = ["spark.jars.packages", "spark.jars", "spark.jars.packagesX", "Spark.jars.packages", "spark.eventLog.dir",
        "spark.eventLog", "spark.eventLog.", "spark.driver.extraJavaOptions", "spark.driver.extraJavaOptionsX",
        "spark.ax", "spark.x", "spark.abx", "spark.kubernetes.driver.label.team/a", "spark.kubernetes.driver.label.team",
        "a+b(c)|d$e^f{1}", "ab(c)|d$e^f{1}", "aab(c)d", "", "spark.locality.wait", "spark.locality.wait.node",
        "spark.locality.wait.", "spark.locality.waitx", "spark.kubernetes.node.selector.kubernetes.io/hostname",
        "spark.kubernetes.node.selector", "spark.kubernetes.executor.volumes.pvc.data.mount.path",
        "spark.kubernetes.executor.volumes", "spark.task.cpus", "spark.task.cpus\n", "spark.locality.wait.a\nb",
        "xspark.task.cpus", "spark.task.cpusx", "spark_task_cpus", "spark.sql.shuffle.partitions"]


@pytest.mark.parametrize("glob", GLOBS)
def test_glob_regex_agrees_with_fnmatch(glob):
    regex = _python(admission_policy.glob_regex(glob))
    for key in KEYS + [glob]:
        assert bool(regex.search(key)) == fnmatchcase(key, glob), (glob, key)


def test_the_built_in_regex_allows_what_the_allow_list_allows():
    regex = _python(admission_policy.allowed_regex())
    for key in KEYS + list(spark_security.ALLOWED):
        assert bool(regex.search(key)) == any(fnmatchcase(key, g) for g in spark_security.ALLOWED), key
        refused = spark_security.refused_spark_conf({key: "1"})
        if refused.get(key) in (None, spark_security.NOT_ALLOWED):  # not the CRD's to refuse
            assert bool(regex.search(key)) == (key not in refused), key


def test_character_classes_are_refused_not_misread():
    for glob in ("spark.[ab]", "spark.x]"):
        with pytest.raises(ValueError, match="character classes"):
            admission_policy.glob_regex(glob)


def _policy_refuses_reference(value: str) -> bool:
    """The policy's badReferenceConfig condition for one string value, in Python."""
    whole = _python("^" + admission_policy.REFERENCE + "$")
    if "${secret:" not in value and "${configmap:" not in value:
        return False
    return not all(whole.search(c) for c in re.findall(admission_policy.REFERENCE_CANDIDATE, value))


def _model_refuses(config: dict) -> bool:
    try:
        ConnectorSpec.model_validate({"class": "noop-sink", "kafka": {"bootstrapServers": "k:9092"}, "config": config})
    except (ValueError, ManifestError):
        return True
    return False


@pytest.mark.parametrize("value", [
    "${secret:pg:password}", "${configmap:c:k}", "jdbc:postgresql://h/db?user=${secret:pg:user}&password=${secret:pg:pw}",
    "${secret:pg-1.a:.hidden_key-1}", "${env:HOME}", "plain", "$", "${", "${secret", "${configmap}", "}${secret:a:b}",
])
def test_valid_references_pass_both(value):
    assert not _policy_refuses_reference(value) and not _model_refuses({"x": value})


@pytest.mark.parametrize("value", [
    "${secret:pg:../../x}", "${secret:pg:/var/run/secrets/kubernetes.io/serviceaccount/token}", "${configmap:c:..}",
    "${configmap:c:.}", "${secret:pg:..hidden}", "${secret:pg:a/b}", "${secret:Pg:k}", "${secret:pg.:k}",
    "${secret:pg:a:b}", "${secret:pg:password} ${secret:pg:../x}", "${secret:pg:k k}",
])
def test_invalid_references_are_refused_by_both(value):
    assert _policy_refuses_reference(value) and _model_refuses({"x": value})


@pytest.mark.parametrize("value", ["${secret:pg}", "${secret:pg:", "${configmap:c:k", "${secret:pg${secret:pg:k}",
                                   "${secret::k}"])
def test_the_policy_also_refuses_what_the_model_leaves_literal(value):
    """A ``${secret:`` that begins no whole reference is refused at admission; the model passes it
    on as text (its expression does not match it), which reads no file either."""
    assert _policy_refuses_reference(value)


def test_the_policy_names_the_models_code_loading_properties_and_reasons():
    text = admission_policy.TEMPLATE.read_text()
    for prop in CODE_LOADING_CLIENT_PROPERTIES:
        assert f'"{prop}"' in text
    spec = admission_policy.policy_spec()
    messages = " ".join(v["messageExpression"] for v in spec["validations"])
    for reason in (spark_security.NOT_ALLOWED, spark_security.JAVA_OPTIONS_SET_SPARK):
        assert reason.replace('"', '\\"') in messages
    assert [r["operations"] for r in spec["matchConstraints"]["resourceRules"]] == [["CREATE", "UPDATE"]]


def test_the_template_is_gated_on_the_api_and_the_value():
    first_action = admission_policy.render().split("*/}}\n", 1)[1].splitlines()[0]
    assert ".Values.admissionPolicy.enabled" in first_action
    assert '.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"' in first_action
