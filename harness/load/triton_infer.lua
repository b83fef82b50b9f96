-- wrk script: POST one Triton binary-tensor inference request (KServe v2 + binary extension) and
-- print a JSON summary. Usage: wrk -s triton_infer.lua URL -- BODY_FILE JSON_HEADER_LENGTH
-- The body is a JSON header followed by raw tensor bytes; Inference-Header-Content-Length says
-- where the JSON ends.

function init(args)
   local file = assert(io.open(args[1], "rb"))
   wrk.body = file:read("*a")
   file:close()
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/octet-stream"
   wrk.headers["Inference-Header-Content-Length"] = args[2]
end

function done(summary, latency, requests)
   io.write(string.format(
      'YTS_WRK {"requests": %d, "duration_us": %d, "bytes": %d, "connect_errors": %d, "read_errors": %d, ' ..
      '"write_errors": %d, "status_errors": %d, "timeouts": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, "mean_us": %f}\n',
      summary.requests, summary.duration, summary.bytes, summary.errors.connect, summary.errors.read,
      summary.errors.write, summary.errors.status, summary.errors.timeout,
      latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean))
end
