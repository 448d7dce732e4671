"""The transformation chain of a connector, from Kafka Connect's configuration keys.

Keys (as ``ConnectorConfig``; each alias's sub-keys are passed to ``configure`` with
the prefix removed)::

    transforms                      comma-separated aliases, applied in this order
    transforms.<alias>.type         Kafka Connect class name, alias (InsertField$Value),
                                    or a dotted Python path (pkg.mod.Class / pkg.mod:Class)
    transforms.<alias>.<key>        the transformation's own configuration
    transforms.<alias>.predicate    a predicate alias listed in ``predicates`` (optional)
    transforms.<alias>.negate       apply when the predicate is *false* (boolean, default false)
    predicates                      comma-separated predicate aliases
    predicates.<alias>.type         predicate class name, alias or dotted Python path
    predicates.<alias>.<key>        the predicate's own configuration

As in Kafka Connect, ``configure`` receives every key under the prefix, ``type``
included, except ``predicate`` and ``negate``; each transformation that names a
predicate gets its own predicate instance; a transformation applies when there is no
predicate or when ``negate XOR predicate.test(record)``.

Configuration errors are collected into one :class:`~conveyor.api.ConfigError` keyed
by full configuration key (``transforms.route.type``, ``transforms.route.regex``,
``predicates.isTombstone.type``...).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conveyor.api.errors import ConfigError, DataError, RetriableError
from conveyor.api.transforms import Predicate, Transformation
from conveyor.converters._config import as_text, get_bool, missing, parse_list, prefixed_error, sub_config
from conveyor.converters._loading import PluginNotFound, load_class
from conveyor.transforms._batches import NoBatchForm, RowsFailed
from conveyor.transforms._registry import PREDICATES, TRANSFORMATIONS, reported_class_name

log = logging.getLogger(__name__)

STAGE = "TRANSFORMATION"


class TransformationError(DataError):
    """A transformation (or its predicate) raised while processing a record.

    Attributes:
        alias: the transformation's alias in ``transforms``.
        transformation_class: Kafka Connect's class name for built-ins
            (``org.apache.kafka.connect.transforms.InsertField$Value``), else the Python
            ``module.QualName``; what ``__connect.errors.class.name`` reports.
        stage: always ``"TRANSFORMATION"``.
        original: the exception raised (also ``__cause__``).
    """

    stage = STAGE

    def __init__(self, alias: str, transformation_class: str, original: BaseException) -> None:
        self.alias = alias
        self.transformation_class = transformation_class
        self.original = original
        detail = str(original) if isinstance(original, DataError) else f"{type(original).__name__}: {original}"
        super().__init__(f"transformation '{alias}' ({transformation_class}) failed: {detail}")


class TransformationStage:
    """One configured transformation with its optional predicate (``TransformationStage``)."""

    __slots__ = ("alias", "negate", "predicate", "predicate_alias", "transformation", "transformation_class")

    def __init__(
        self,
        alias: str,
        transformation: Transformation,  # type: ignore[type-arg]
        predicate: Predicate | None = None,  # type: ignore[type-arg]
        negate: bool = False,
        predicate_alias: str | None = None,
    ) -> None:
        self.alias = alias
        self.transformation = transformation
        self.transformation_class = reported_class_name(transformation)
        self.predicate = predicate
        self.predicate_alias = predicate_alias
        self.negate = negate

    def apply(self, record: Any) -> Any:
        predicate = self.predicate
        if predicate is None or self.negate is not bool(predicate.test(record)):
            return self.transformation.apply(record)
        return record

    def batch_types(self, key_type: pa.DataType | None,
                    value_type: pa.DataType | None) -> tuple[pa.DataType | None, pa.DataType | None]:
        """The key and value column types this stage leaves (``None``: typed).

        Raises:
            NoBatchForm: the stage has no batch form for these columns (the message says why).
        """
        if not hasattr(self.transformation, "apply_batch"):
            raise NoBatchForm(f"transformation '{self.alias}' ({self.transformation_class}) has no batch form")
        if self.predicate is not None and not hasattr(self.predicate, "test_batch"):
            raise NoBatchForm(f"predicate '{self.predicate_alias}' ({reported_class_name(self.predicate)}) has no "
                              "batch form")
        types = getattr(self.transformation, "batch_types", None)
        if types is None:
            return key_type, value_type
        try:
            return types(key_type, value_type)  # type: ignore[no-any-return]
        except NoBatchForm as exc:
            raise NoBatchForm(f"transformation '{self.alias}' ({self.transformation_class}): {exc}") from None

    def apply_batch(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """The stage on ``batch``: the batches it leaves.

        Raises:
            RowsFailed: rows failed (each alone); the others are in its ``batches``.
            RetriableError: as raised by the transformation.
        """
        where = None
        if self.predicate is not None:
            where = self.predicate.test_batch(batch)  # type: ignore[attr-defined]
            if self.negate:
                where = pc.invert(where)
        try:
            result = self.transformation.apply_batch(batch, where)  # type: ignore[attr-defined]
        except (RowsFailed, RetriableError):
            raise
        except Exception as exc:  # every row it was to transform fails, alone
            if where is None:
                raise RowsFailed([batch.slice(0, 0)], [(i, exc) for i in range(batch.num_rows)]) from exc
            rows = pc.indices_nonzero(where).to_pylist()
            raise RowsFailed([batch.filter(pc.invert(where))], [(i, exc) for i in rows]) from exc
        return result if isinstance(result, list) else [result]

    def close(self) -> None:
        for part in (self.transformation, self.predicate):
            if part is None:
                continue
            try:
                part.close()
            except Exception:
                log.warning(
                    "closing %s of transformation '%s' failed", reported_class_name(part), self.alias, exc_info=True
                )


class TransformationChain:
    """Applies a connector's transformations in order.

    An empty chain (:attr:`is_empty`) returns each record as it is; callers on the hot
    path may skip calling :meth:`apply` at all.
    """

    __slots__ = ("_closed", "stages")

    def __init__(self, stages: Iterable[TransformationStage] = ()) -> None:
        self.stages: tuple[TransformationStage, ...] = tuple(stages)
        self._closed = False

    @property
    def is_empty(self) -> bool:
        return not self.stages

    def __len__(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        return f"TransformationChain([{', '.join(s.alias for s in self.stages)}])"

    def apply(self, record: Any) -> Any:
        """Apply every stage in order; ``None`` as soon as one drops the record.

        Raises:
            RetriableError: as raised by a transformation (so that the runtime retries),
                with ``transformation_alias`` and ``transformation_class`` attributes set.
            TransformationError: for any other exception, naming the failing alias.
        """
        for stage in self.stages:
            try:
                record = stage.apply(record)
            except RetriableError as exc:
                exc.transformation_alias = stage.alias  # type: ignore[attr-defined]
                exc.transformation_class = stage.transformation_class  # type: ignore[attr-defined]
                raise
            except Exception as exc:
                raise TransformationError(stage.alias, stage.transformation_class, exc) from exc
            if record is None:
                return None
        return record

    def batch_types(self, key_type: pa.DataType | None,
                    value_type: pa.DataType | None) -> tuple[pa.DataType | None, pa.DataType | None]:
        """The key and value column types the chain leaves for batches whose columns have
        these types (``None``: typed by Connect schemas; :mod:`conveyor.api.batches`).

        Raises:
            NoBatchForm: the first stage without a batch form for its columns (the message
                names it and says why).
        """
        for stage in self.stages:
            key_type, value_type = stage.batch_types(key_type, value_type)
        return key_type, value_type

    def apply_batch(self, batch: pa.RecordBatch,
                    failed: Callable[[pa.RecordBatch, str, Exception], None]) -> list[pa.RecordBatch]:
        """:meth:`apply` on a record batch (``conveyor.api.batches``): every stage in order on
        the rows the previous left; each row as :meth:`apply` would leave its record (a
        dropped record's row is gone). Only for a chain :meth:`batch_types` accepts.

        A row a stage cannot transform leaves the batch and goes to ``failed(row,
        transformation_class, error)`` (``row``: a batch of that one row as the stage got it;
        ``error``: a :class:`TransformationError`), as :meth:`apply` raises for its record.
        Returns the batches left: one, or more where a stage changed a schema midway.

        Stages with a batch form: ``Filter``, ``InsertHeader``, ``DropHeaders`` and
        ``RegexRouter`` on any columns; ``ReplaceField``, ``ExtractField``, ``HoistField``,
        ``InsertField``, ``MaskField``, ``Flatten``, ``Cast`` (``$Key``/``$Value``) and
        ``ValueToKey`` on typed columns (keys or values with Connect schemas); each with or without a predicate among ``TopicNameMatches``,
        ``HasHeaderKey`` and ``RecordIsTombstone``. A batch form transforms only the rows its
        predicate selects (``where``; ``None``: all rows). See :mod:`._batches`.

        Raises:
            RetriableError: as raised by a transformation, with ``transformation_alias`` and
                ``transformation_class`` attributes set.
        """
        batches = [batch]
        for stage in self.stages:
            left: list[pa.RecordBatch] = []
            for part in batches:
                try:
                    left.extend(stage.apply_batch(part))
                except RowsFailed as exc:
                    for row, error in exc.failures:
                        failed(part.slice(row, 1), stage.transformation_class,
                               TransformationError(stage.alias, stage.transformation_class, error))
                    left.extend(exc.batches)
                except RetriableError as exc:
                    exc.transformation_alias = stage.alias  # type: ignore[attr-defined]
                    exc.transformation_class = stage.transformation_class  # type: ignore[attr-defined]
                    raise
            batches = [b for b in left if b.num_rows] or left[:1] or [batch.slice(0, 0)]
            if not batches[0].num_rows:
                break
        return batches

    def close(self) -> None:
        """Close every transformation and predicate (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        for stage in self.stages:
            stage.close()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TransformationChain:
        """Build and configure the chain a connector configuration describes.

        Raises:
            ConfigError: every problem found, keyed by full configuration key.
        """
        return _ChainBuilder(config).build()


def transformation_class(name: Any) -> type[Transformation]:  # type: ignore[type-arg]
    """The class a ``transforms.<alias>.type`` value names.

    Raises:
        PluginNotFound: naming the known class names and aliases.
    """
    return load_class(name, TRANSFORMATIONS, Transformation, "transformation")


def predicate_class(name: Any) -> type[Predicate]:  # type: ignore[type-arg]
    """The class a ``predicates.<alias>.type`` value names."""
    return load_class(name, PREDICATES, Predicate, "predicate")


class _ChainBuilder:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.errors: dict[str, str] = {}
        self.created: list[Any] = []

    def build(self) -> TransformationChain:
        config = self.config
        aliases = self._aliases("transforms")
        predicate_aliases = self._aliases("predicates")
        predicate_types: dict[str, type] = {}
        for alias in predicate_aliases:
            cls = self._resolve(f"predicates.{alias}.type", predicate_class)
            if cls is not None:
                predicate_types[alias] = cls
        used: set[str] = set()
        stages = []
        for alias in aliases:
            prefix = f"transforms.{alias}."
            cls = self._resolve(prefix + "type", transformation_class)
            own = sub_config(config, prefix)
            predicate_alias = own.pop("predicate", None)
            negate_value = own.pop("negate", None)
            negate = self._negate(prefix, negate_value)
            transformation = None if cls is None else self._configure(cls, own, prefix)
            predicate = None
            if predicate_alias is not None and as_text(predicate_alias).strip():
                predicate_alias = as_text(predicate_alias).strip()
                used.add(predicate_alias)
                if predicate_alias not in predicate_aliases:
                    self.errors[prefix + "predicate"] = (
                        f"predicate '{predicate_alias}' is not listed in 'predicates' "
                        f"({', '.join(predicate_aliases) or 'empty'})"
                    )
                elif predicate_alias in predicate_types:
                    predicate = self._configure_predicate(predicate_alias, predicate_types[predicate_alias])
            else:
                predicate_alias = None
                if negate_value is not None:
                    log.warning("%snegate is set but transformation '%s' has no predicate; ignored", prefix, alias)
            if transformation is not None and (predicate_alias is None or predicate is not None):
                stages.append(TransformationStage(alias, transformation, predicate, negate, predicate_alias))
        for alias, cls in predicate_types.items():
            if alias not in used:  # validate it all the same, as Kafka Connect does
                unused = self._configure_predicate(alias, cls)
                if unused is not None:
                    self.created.remove(unused)
                    _close_quietly(unused)
                log.info("predicate '%s' is defined but no transformation uses it", alias)
        self._unlisted("transforms", aliases, "transformation")
        self._unlisted("predicates", predicate_aliases, "predicate")
        if self.errors:
            for obj in self.created:
                _close_quietly(obj)
            raise ConfigError(self.errors)
        return TransformationChain(stages)

    def _unlisted(self, key: str, aliases: list[str], what: str) -> None:
        """A ``<key>.<alias>.*`` key of an alias that ``key`` does not list is refused: nothing
        reads it (Kafka Connect ignores it, so a typo in an alias goes unseen)."""
        prefixes = tuple(f"{key}.{alias}." for alias in aliases)
        for name in self.config:
            if name.startswith(f"{key}.") and not name.startswith(prefixes):
                alias = name[len(key) + 1:].split(".", 1)[0]
                self.errors[name] = (f"{what} '{alias}' is not listed in '{key}' ({', '.join(aliases) or 'empty'}), "
                                     "so nothing reads this key")

    def _aliases(self, key: str) -> list[str]:
        value = self.config.get(key)
        if value is None:
            return []
        try:
            aliases = parse_list(key, value)
        except ConfigError as exc:
            self.errors.update(exc.errors)
            return []
        seen: set[str] = set()
        result = []
        for alias in aliases:
            if not alias:
                self.errors[key] = f"Invalid value {as_text(value)} for configuration {key}: empty alias"
            elif alias in seen:
                self.errors[key] = f"Invalid value {as_text(value)} for configuration {key}: Duplicate alias provided."
            else:
                seen.add(alias)
                result.append(alias)
        return result

    def _resolve(self, key: str, resolver: Any) -> type | None:
        name = self.config.get(key)
        if name is None or (isinstance(name, str) and not name.strip()):
            self.errors.update(missing(key).errors)
            return None
        try:
            return resolver(name)  # type: ignore[no-any-return]
        except PluginNotFound as exc:
            self.errors[key] = str(exc)
            return None

    def _negate(self, prefix: str, value: Any) -> bool:
        try:
            return bool(get_bool({"negate": value}, "negate", False))
        except ConfigError as exc:
            self.errors.update(prefixed_error(prefix, exc).errors)
            return False

    def _configure(self, cls: type, own: Mapping[str, Any], prefix: str) -> Any:
        try:
            obj = cls()
            self.created.append(obj)
            obj.configure(own)
        except ConfigError as exc:
            self.errors.update(prefixed_error(prefix, exc).errors)
            return None
        except Exception as exc:  # noqa: BLE001 - a failing configure is a configuration error
            self.errors[prefix.rstrip(".")] = (
                f"{reported_class_name(cls)} could not be configured: {type(exc).__name__}: {exc}"
            )
            return None
        return obj

    def _configure_predicate(self, alias: str, cls: type) -> Any:
        prefix = f"predicates.{alias}."
        return self._configure(cls, sub_config(self.config, prefix), prefix)


def _close_quietly(obj: Any) -> None:
    try:
        obj.close()
    except Exception:
        log.debug("closing %r failed", obj, exc_info=True)
