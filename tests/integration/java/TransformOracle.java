/*
 * Oracle for tests/integration/test_transform_oracle.py: runs one of Apache Kafka Connect's own
 * transformations on a record and prints the record it returns.
 *
 * Run as a single-file program with the Kafka Connect jars on the class path, one request a
 * line on stdin, one JSON answer a line on stdout (in the same order). A request is a JSON
 * object {"class": <transformation class>, "config": {...}, "key": <envelope>, "value":
 * <envelope>, "headers": [[name, <envelope>], ...]}, each envelope JsonConverter's
 * {"schema": ..., "payload": ...} (schemas.enable=true), read with JsonConverter. The answer
 * is {"key", "value", "headers": [[name, <envelope>], ...]} as JsonConverter writes them back,
 * or {"error": <exception class>, "message": ...}. Run with -Duser.timezone=UTC.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.transforms.Transformation;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

public class TransformOracle {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String TOPIC = "topic";

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(System.err); // anything a library prints stays off the answers
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true", "converter.type", "value"));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            out.println(JSON.writeValueAsString(answer(converter, JSON.readTree(line))));
        }
    }

    private static ObjectNode answer(JsonConverter converter, JsonNode request) {
        ObjectNode answer = JSON.createObjectNode();
        try {
            @SuppressWarnings("unchecked")
            Transformation<SinkRecord> transformation =
                (Transformation<SinkRecord>) Class.forName(request.get("class").asText())
                    .getDeclaredConstructor().newInstance();
            Map<String, String> config = new HashMap<>();
            Iterator<Map.Entry<String, JsonNode>> entries = request.get("config").fields();
            while (entries.hasNext()) {
                Map.Entry<String, JsonNode> entry = entries.next();
                config.put(entry.getKey(), entry.getValue().asText());
            }
            transformation.configure(config);
            SchemaAndValue key = read(converter, request.get("key"));
            SchemaAndValue value = read(converter, request.get("value"));
            ConnectHeaders headers = new ConnectHeaders();
            for (JsonNode header : request.withArray("headers")) {
                SchemaAndValue data = read(converter, header.get(1));
                headers.add(header.get(0).asText(), data.value(), data.schema());
            }
            SinkRecord record = new SinkRecord(TOPIC, 0, key.schema(), key.value(), value.schema(), value.value(),
                                               0L, 1700000000000L, org.apache.kafka.common.record.TimestampType.CREATE_TIME,
                                               headers);
            SinkRecord result = transformation.apply(record);
            if (result == null) {
                answer.putNull("record");
                return answer;
            }
            answer.set("key", write(converter, result.keySchema(), result.key()));
            answer.set("value", write(converter, result.valueSchema(), result.value()));
            ArrayNode written = answer.putArray("headers");
            for (Header header : result.headers()) {
                ArrayNode pair = written.addArray();
                pair.add(header.key());
                pair.add(write(converter, header.schema(), header.value()));
            }
        } catch (Throwable e) {
            answer.removeAll();
            answer.put("error", e.getClass().getName());
            answer.put("message", String.valueOf(e.getMessage()));
        }
        return answer;
    }

    private static SchemaAndValue read(JsonConverter converter, JsonNode envelope) throws Exception {
        if (envelope == null || envelope.isNull()) {
            return SchemaAndValue.NULL;
        }
        return converter.toConnectData(TOPIC, JSON.writeValueAsBytes(envelope));
    }

    private static JsonNode write(JsonConverter converter, org.apache.kafka.connect.data.Schema schema, Object value)
            throws Exception {
        byte[] bytes = converter.fromConnectData(TOPIC, schema, value);
        return bytes == null ? JSON.nullNode() : JSON.readTree(bytes);
    }
}
