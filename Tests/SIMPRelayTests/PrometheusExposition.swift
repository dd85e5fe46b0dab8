/// A Prometheus text exposition read into metric families, for tests of /metrics.
struct PrometheusExposition {
    /// `# HELP` text by family name.
    private(set) var help: [String: String] = [:]
    /// `# TYPE` by family name (counter, gauge, histogram, …).
    private(set) var types: [String: String] = [:]
    /// Every sample: its name, labels and value.
    private(set) var samples: [(name: String, labels: [String: String], value: Double)] = []

    init(text: String) {
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ", maxSplits: 3).map(String.init)
            if words.count >= 3, words[0] == "#", words[1] == "HELP" {
                help[words[2]] = words.count == 4 ? words[3] : ""
            } else if words.count == 4, words[0] == "#", words[1] == "TYPE" {
                types[words[2]] = words[3]
            } else if !line.hasPrefix("#"), let sample = Self.sample(String(line)) {
                samples.append(sample)
            }
        }
    }

    /// The family a sample belongs to: a histogram's `_bucket`, `_sum` and `_count` samples
    /// belong to the histogram.
    func family(ofSample name: String) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if types[base] == "histogram" { return base }
        }
        return name
    }

    /// Names of every sample (with histogram suffixes).
    var sampleNames: Set<String> { Set(samples.map(\.name)) }

    /// The value of the one sample named `name` whose labels include `labels`.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }?.value
    }

    /// `name{a="x",b="y"} 1.5` (label values without escapes; enough for the relay's output).
    private static func sample(_ line: String) -> (name: String, labels: [String: String], value: Double)? {
        guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { return nil }
        let series = line[..<space]
        guard let open = series.firstIndex(of: "{") else { return (String(series), [:], value) }
        var labels: [String: String] = [:]
        for pair in series[series.index(after: open)...].dropLast().split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            labels[String(parts[0])] = String(parts[1].dropFirst().dropLast())
        }
        return (String(series[..<open]), labels, value)
    }
}
