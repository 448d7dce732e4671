"""Which connector classes the operator imports to validate a Connector's config (issue 13, item 8).

Resolving a dotted path imports a module, which runs its code with the operator's ServiceAccount.
So the operator imports only:

* installed connectors: entry points of group ``conveyor.connectors`` (by name, or a dotted path
  into the module of one), which are part of the operator's image;
* modules matching a glob of ``settings.allowed_connector_modules`` (the chart's
  ``allowedConnectorModules``; ``fnmatch``, so ``acme.connectors.*`` covers every module below
  ``acme.connectors``; default none);
* modules already imported (importing them again runs nothing).

The same rule covers the classes ``spec.config`` names by dotted path (converters,
transformations, predicates). A Connector naming anything else is not validated in the operator:
its driver validates the config when it starts (an invalid one makes the connector ``FAILED``,
with the reason in ``status.connector.trace``), and the operator says so in a Normal Event
``ConfigValidatedByDriver`` and the ``Progressing`` condition.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence

from conveyor import import_policy
from conveyor.manifest import ConnectorManifest
from conveyor.runtime.config.plugins import connector_entry_points
from conveyor_operator.settings import OperatorSettings
from conveyor_operator.validate.checks import connector_config_errors

EVENT_REASON = "ConfigValidatedByDriver"


def installed_connector_modules() -> set[str]:
    """Modules of the installed connectors' entry points (group ``conveyor.connectors``)."""

    return {value.partition(":")[0].strip() for value in connector_entry_points().values()}


def import_rule(allowed_globs: Sequence[str]) -> Callable[[str], bool]:
    """Whether the operator may import a module: an installed connector's, or one matching a glob."""
    installed = installed_connector_modules()
    globs = [g.strip() for g in allowed_globs if g.strip()]
    return lambda module: module in installed or any(fnmatch.fnmatchcase(module, g) for g in globs)


def config_errors(manifest: ConnectorManifest, settings: OperatorSettings) -> tuple[str, str]:
    """The connector's own config validation, run in the operator under :func:`import_rule`.

    Returns:
        ``(errors, note)``: the ``spec.config.<key>: <message>`` lines of
        :func:`conveyor_operator.validate.checks.connector_config_errors` (``""`` when valid or not
        judged here), and ``""`` or, when the spec names a module the operator may not import,
        the sentence for the Event and condition saying that the driver validates the config.
    """

    try:
        with import_policy.restricted(import_rule(settings.allowed_connector_modules)):
            return connector_config_errors(manifest), ""
    except import_policy.ImportNotAllowed as exc:
        return "", (
            f"the config of {manifest.spec.connector_class} is validated by its driver when it starts, not by the "
            f"operator (an invalid one makes the connector FAILED, see status.connector.trace): the operator "
            f"imports only installed connectors (entry points of group conveyor.connectors) and modules matching "
            f"allowedConnectorModules, and the spec names a class in module {exc.module!r}"
        )
