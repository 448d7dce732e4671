"""Text as Java writes and reads it, for the places where Conveyor must match Kafka Connect to
the character: ``SimpleDateFormat`` patterns (:mod:`.date_format`) and Connect's ISO-8601 ones
(:mod:`.dates`), ``String.valueOf`` of numbers (:mod:`.numbers`), Java regular expressions and
replacement strings (:mod:`.regex`), and Java's primitive conversions (:mod:`.values`).

Pure: no Spark, Kafka or Kubernetes. Used by the converters, the transforms and the file
connectors; a new Java-compatible rule goes here, with the Java class it follows named.
"""
