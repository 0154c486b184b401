"""What :func:`~sparseldp.spark.privatize`, :func:`~sparseldp.spark.count_reports` and
:func:`~sparseldp.spark.save_parquet` share on the driver: the pyspark check and the column checks.

Nothing here imports pyspark at the top: :func:`_require_pyspark` does, when a function is called,
and says what to install when it is missing.
"""

from __future__ import annotations

#: What to install when pyspark is missing.
INSTALL_HINT = "pip install 'sparseldp[spark]'"


def _require_pyspark():
    try:
        from pyspark.sql import DataFrame
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"sparseldp.spark needs pyspark (with pandas and pyarrow), which is not installed; "
            f"install the extra: {INSTALL_HINT}", name="pyspark") from exc
    return DataFrame


def _check_df(df):
    DataFrame = _require_pyspark()
    if not isinstance(df, DataFrame):
        raise TypeError(f"df must be a pyspark.sql.DataFrame; got {type(df).__name__}")
    return df


def _find_field(df, column, name: str = "column"):
    """The schema field named ``column`` (exact, unique), or ValueError naming the columns there are."""
    if not isinstance(column, str) or not column:
        raise TypeError(f"{name} must be a non-empty string (a column name); got {column!r}")
    fields = df.schema.fields
    hits = [i for i, f in enumerate(fields) if f.name == column]
    if not hits:
        names = [f.name for f in fields]
        shown = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise ValueError(f"column {column!r} not found in the DataFrame; its columns are {shown}")
    if len(hits) > 1:
        raise ValueError(f"column {column!r} appears {len(hits)} times in the DataFrame; it must be unique")
    # Spark resolves names in any case (spark.sql.caseSensitive is false by default): another column
    # whose name differs only in case makes the reference ambiguous
    same = [f.name for f in fields if f.name != column and f.name.lower() == column.lower()]
    if same:
        raise ValueError(f"column {column!r} and {', '.join(map(repr, same))} differ only in case, and Spark "
                         "resolves column names in any case; rename one of them")
    return hits[0], fields[hits[0]]


def _kind(field) -> str:
    """``"int"`` or ``"str"``; ValueError for a column type that cannot hold integers by the file rules."""
    from pyspark.sql import types as T

    dt = field.dataType
    if isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int"
    if isinstance(dt, T.StringType):
        return "str"
    raise ValueError(f"column {field.name!r} has type {dt.simpleString()}; privatize and count need an integer "
                     "column (or strings holding integers): floats and decimals are not rounded")


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")
