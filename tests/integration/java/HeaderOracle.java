/*
 * Oracle for tests/integration/test_simple_header_converter_oracle.py: runs Apache Kafka
 * Connect's own SimpleHeaderConverter and Values.convertToString and prints what they return.
 *
 * Run as a single-file program with the Kafka Connect jars on the class path, one request a
 * line on stdin, one JSON answer a line on stdout (in the same order):
 *
 *   P <base64 header bytes>   toConnectHeader("topic", "key", bytes), then fromConnectHeader of
 *                             its result: {"schema": ..., "value": ..., "bytes": base64}
 *                             (or {"error": ...} / {"fromError": ...})
 *   S <JSON value spec>       Values.convertToString(null, value): {"text": ...} or {"error": ...}
 *
 * Values are canonical: null, {"bool": b}, {"int": n} (Byte/Short/Integer/Long), {"f32": bits} /
 * {"f64": bits} (Float / Double, raw IEEE bits in hex), {"dec": unscaled, "scale": s},
 * {"str": s}, {"bytes": base64}, {"date": millis} (java.util.Date), {"list": [...]},
 * {"map": [[k, v], ...]}. A value spec is a JSON array: ["i8"|"i16"|"i32"|"i64", n],
 * ["f32", bits], ["f64", bits], ["bool", b], ["str", s], ["bytes", base64], ["dec", unscaled,
 * scale], ["date"|"time"|"ts", millis], ["list", [spec...]], ["map", [[kspec, vspec]...]], ["null"].
 * Run with -Duser.timezone=UTC (Values parses and formats dates in the JVM's default zone) and
 * -Duser.language=en -Duser.country=US (SimpleDateFormat reads numbers in the default locale).
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Values;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public class HeaderOracle {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(System.err); // anything a library prints stays off the answers
        SimpleHeaderConverter converter = new SimpleHeaderConverter();
        converter.configure(Map.of());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            Map<String, Object> answer = new LinkedHashMap<>();
            String body = line.substring(2);
            if (line.startsWith("P ")) {
                byte[] raw = Base64.getDecoder().decode(body);
                SchemaAndValue parsed = null;
                try {
                    parsed = converter.toConnectHeader("topic", "key", raw);
                    if (parsed == null) { // "null" parses to a Java null, which Connect's headers take as (null, null)
                        parsed = new SchemaAndValue(null, null);
                    }
                } catch (Throwable t) {
                    answer.put("error", t.getClass().getSimpleName() + ": " + t.getMessage());
                }
                if (parsed != null) {
                    answer.put("schema", schema(parsed.schema()));
                    answer.put("value", value(parsed.value()));
                    try {
                        byte[] written = converter.fromConnectHeader("topic", "key", parsed.schema(), parsed.value());
                        answer.put("bytes", written == null ? null : Base64.getEncoder().encodeToString(written));
                    } catch (Throwable t) {
                        answer.put("fromError", t.getClass().getSimpleName() + ": " + t.getMessage());
                    }
                }
            } else if (line.startsWith("S ")) {
                try {
                    answer.put("text", Values.convertToString(null, build(JSON.readTree(body))));
                } catch (Throwable t) {
                    answer.put("error", t.getClass().getSimpleName() + ": " + t.getMessage());
                }
            } else {
                answer.put("error", "unknown request: " + line);
            }
            out.println(JSON.writeValueAsString(answer));
        }
    }

    private static Object schema(Schema schema) {
        if (schema == null) {
            return null;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("type", schema.type().name());
        out.put("optional", schema.isOptional());
        out.put("name", schema.name());
        out.put("version", schema.version());
        out.put("parameters", schema.parameters());
        if (schema.type() == Schema.Type.MAP) {
            out.put("key", schema(schema.keySchema()));
        }
        if (schema.type() == Schema.Type.MAP || schema.type() == Schema.Type.ARRAY) {
            out.put("value", schema(schema.valueSchema()));
        }
        return out;
    }

    private static Object value(Object value) {
        if (value == null) {
            return null;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        if (value instanceof Boolean) {
            out.put("bool", value);
        } else if (value instanceof Byte || value instanceof Short || value instanceof Integer || value instanceof Long) {
            out.put("int", ((Number) value).longValue());
        } else if (value instanceof Float) {
            out.put("f32", Integer.toHexString(Float.floatToRawIntBits((Float) value)));
        } else if (value instanceof Double) {
            out.put("f64", Long.toHexString(Double.doubleToRawLongBits((Double) value)));
        } else if (value instanceof BigDecimal) {
            out.put("dec", ((BigDecimal) value).unscaledValue().toString());
            out.put("scale", ((BigDecimal) value).scale());
        } else if (value instanceof String) {
            out.put("str", value);
        } else if (value instanceof byte[]) {
            out.put("bytes", Base64.getEncoder().encodeToString((byte[]) value));
        } else if (value instanceof java.util.Date) {
            out.put("date", ((java.util.Date) value).getTime());
        } else if (value instanceof List) {
            List<Object> items = new ArrayList<>();
            for (Object item : (List<?>) value) {
                items.add(value(item));
            }
            out.put("list", items);
        } else if (value instanceof Map) {
            List<Object> entries = new ArrayList<>();
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                List<Object> pair = new ArrayList<>();
                pair.add(value(entry.getKey()));
                pair.add(value(entry.getValue()));
                entries.add(pair);
            }
            out.put("map", entries);
        } else {
            out.put("unknown", value.getClass().getName() + ": " + value);
        }
        return out;
    }

    private static Object build(JsonNode spec) {
        String kind = spec.get(0).asText();
        JsonNode arg = spec.size() > 1 ? spec.get(1) : null;
        switch (kind) {
            case "null": return null;
            case "i8": return (byte) arg.asLong();
            case "i16": return (short) arg.asLong();
            case "i32": return (int) arg.asLong();
            case "i64": return new BigInteger(arg.asText()).longValue();
            case "f32": return Float.intBitsToFloat((int) Long.parseLong(arg.asText(), 16));
            case "f64": return Double.longBitsToDouble(Long.parseUnsignedLong(arg.asText(), 16));
            case "bool": return arg.asBoolean();
            case "str": return arg.asText();
            case "bytes": return Base64.getDecoder().decode(arg.asText());
            case "dec": return new BigDecimal(new BigInteger(arg.asText()), spec.get(2).asInt());
            case "date": case "time": case "ts": return new java.util.Date(arg.asLong());
            case "list":
                List<Object> list = new ArrayList<>();
                for (JsonNode item : arg) {
                    list.add(build(item));
                }
                return list;
            case "map":
                Map<Object, Object> map = new LinkedHashMap<>();
                for (JsonNode entry : arg) {
                    map.put(build(entry.get(0)), build(entry.get(1)));
                }
                return map;
            default: throw new IllegalArgumentException("unknown value spec " + spec);
        }
    }
}
