/*
 * Reader for tests/integration/test_archive_avro_java.py: reads Avro object container files with
 * Apache Avro's own Java library (DataFileReader + GenericDatumReader, logical type conversions
 * for decimal, date, time-millis and timestamp-millis) and prints them as JSON.
 *
 * Run as a single-file program with the Apache Avro jars on the class path:
 *
 *   java -cp <avro jars> AvroArchiveReader.java FILE...
 *
 * For every FILE one JSON line on stdout:
 *   {"file": FILE, "codec": "null"|"deflate"|..., "schema": <the writer schema, as Java parsed it>,
 *    "meta": {<user metadata>}, "records": [...]}
 * or {"file": FILE, "error": "<exception>"}. Values: records as objects (field order kept),
 * maps as objects, arrays as arrays, strings, numbers, booleans, null; and tagged objects
 * {"$bytes": base64}, {"$decimal": plain string}, {"$date": days since the epoch},
 * {"$time": milliseconds of the day}, {"$ts": milliseconds since the epoch}.
 */

import org.apache.avro.Conversions;
import org.apache.avro.Schema;
import org.apache.avro.data.TimeConversions;
import org.apache.avro.file.DataFileReader;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;

import java.io.File;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.Base64;
import java.util.Collection;
import java.util.Map;

public class AvroArchiveReader {

    public static void main(String[] args) throws Exception {
        GenericData data = new GenericData();
        data.addLogicalTypeConversion(new Conversions.DecimalConversion());
        data.addLogicalTypeConversion(new TimeConversions.DateConversion());
        data.addLogicalTypeConversion(new TimeConversions.TimeMillisConversion());
        data.addLogicalTypeConversion(new TimeConversions.TimestampMillisConversion());
        for (String path : args) {
            StringBuilder out = new StringBuilder();
            out.append("{\"file\":");
            string(out, path);
            try (DataFileReader<Object> reader =
                         new DataFileReader<>(new File(path), new GenericDatumReader<>(null, null, data))) {
                Schema schema = reader.getSchema();
                // parse the schema text again, strictly (names, defaults validated)
                Schema reparsed = new Schema.Parser().setValidateDefaults(true).parse(schema.toString());
                out.append(",\"codec\":");
                string(out, reader.getMetaString("avro.codec") == null ? "null" : reader.getMetaString("avro.codec"));
                out.append(",\"schema\":").append(reparsed.toString());
                out.append(",\"meta\":{");
                boolean first = true;
                for (String key : reader.getMetaKeys()) {
                    if (key.startsWith("avro.")) continue;
                    if (!first) out.append(',');
                    first = false;
                    string(out, key);
                    out.append(':');
                    string(out, reader.getMetaString(key));
                }
                out.append("},\"records\":[");
                first = true;
                for (Object datum : reader) {
                    if (!first) out.append(',');
                    first = false;
                    value(out, datum);
                }
                out.append("]}");
            } catch (Exception e) {
                out.setLength(0);
                out.append("{\"file\":");
                string(out, path);
                out.append(",\"error\":");
                string(out, e.toString());
                out.append('}');
            }
            System.out.println(out);
        }
    }

    static void value(StringBuilder out, Object v) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof GenericRecord) {
            GenericRecord record = (GenericRecord) v;
            out.append('{');
            boolean first = true;
            for (Schema.Field field : record.getSchema().getFields()) {
                if (!first) out.append(',');
                first = false;
                string(out, field.name());
                out.append(':');
                value(out, record.get(field.pos()));
            }
            out.append('}');
        } else if (v instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) out.append(',');
                first = false;
                string(out, e.getKey().toString());
                out.append(':');
                value(out, e.getValue());
            }
            out.append('}');
        } else if (v instanceof Collection) {
            out.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) v) {
                if (!first) out.append(',');
                first = false;
                value(out, item);
            }
            out.append(']');
        } else if (v instanceof CharSequence) {
            string(out, v.toString());
        } else if (v instanceof ByteBuffer) {
            ByteBuffer buffer = ((ByteBuffer) v).duplicate();
            byte[] bytes = new byte[buffer.remaining()];
            buffer.get(bytes);
            out.append("{\"$bytes\":\"").append(Base64.getEncoder().encodeToString(bytes)).append("\"}");
        } else if (v instanceof GenericData.Fixed) {
            out.append("{\"$bytes\":\"").append(Base64.getEncoder().encodeToString(((GenericData.Fixed) v).bytes()))
                    .append("\"}");
        } else if (v instanceof BigDecimal) {
            out.append("{\"$decimal\":\"").append(((BigDecimal) v).toPlainString()).append("\"}");
        } else if (v instanceof LocalDate) {
            out.append("{\"$date\":").append(((LocalDate) v).toEpochDay()).append('}');
        } else if (v instanceof LocalTime) {
            out.append("{\"$time\":").append(((LocalTime) v).toNanoOfDay() / 1_000_000L).append('}');
        } else if (v instanceof Instant) {
            out.append("{\"$ts\":").append(((Instant) v).toEpochMilli()).append('}');
        } else if (v instanceof Float || v instanceof Double) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                string(out, Double.toString(d));
            } else {
                out.append(Double.toString(d));
            }
        } else if (v instanceof Number || v instanceof Boolean) {
            out.append(v.toString());
        } else if (v instanceof GenericData.EnumSymbol) {
            string(out, v.toString());
        } else {
            throw new IllegalStateException("unexpected value of class " + v.getClass().getName());
        }
    }

    static void string(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
