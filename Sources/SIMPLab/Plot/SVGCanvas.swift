import Foundation

/// A small SVG writer for the lab's charts: elements, linear and logarithmic scales, and
/// axes with tick labels. Elements carry `class`/`data-*` attributes so tests (and users) can
/// find the axes and series in the file.
struct SVGCanvas {
    let width: Double
    let height: Double
    private var elements: [String] = []

    init(width: Double, height: Double) {
        self.width = width
        self.height = height
    }

    /// The finished document.
    var document: String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <svg xmlns="http://www.w3.org/2000/svg" width="\(n(width))" height="\(n(height))" \
        viewBox="0 0 \(n(width)) \(n(height))" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">
        <rect x="0" y="0" width="\(n(width))" height="\(n(height))" fill="white"/>
        \(elements.joined(separator: "\n"))
        </svg>

        """
    }

    mutating func add(_ element: String) { elements.append(element) }

    /// Opens a group; `close()` ends it.
    mutating func open(_ attributes: String) { elements.append("<g \(attributes)>") }
    mutating func close() { elements.append("</g>") }

    mutating func text(
        _ content: String, x: Double, y: Double, anchor: String = "start", size: Double = 12,
        weight: String = "normal", fill: String = "#222", attributes: String = ""
    ) {
        add(
            "<text x=\"\(n(x))\" y=\"\(n(y))\" text-anchor=\"\(anchor)\" font-size=\"\(n(size))\" font-weight=\"\(weight)\" "
                + "fill=\"\(fill)\" \(attributes)>\(escape(content))</text>")
    }

    mutating func line(x1: Double, y1: Double, x2: Double, y2: Double, stroke: String, width: Double = 1, dash: String? = nil) {
        add(
            "<line x1=\"\(n(x1))\" y1=\"\(n(y1))\" x2=\"\(n(x2))\" y2=\"\(n(y2))\" stroke=\"\(stroke)\" stroke-width=\"\(n(width))\""
                + (dash.map { " stroke-dasharray=\"\($0)\"" } ?? "") + "/>")
    }

    mutating func rect(x: Double, y: Double, width: Double, height: Double, fill: String, opacity: Double = 1, attributes: String = "") {
        add(
            "<rect x=\"\(n(x))\" y=\"\(n(y))\" width=\"\(n(max(0, width)))\" height=\"\(n(max(0, height)))\" fill=\"\(fill)\""
                + (opacity < 1 ? " fill-opacity=\"\(n(opacity))\"" : "") + " \(attributes)/>")
    }

    mutating func polyline(_ points: [(Double, Double)], stroke: String, width: Double = 1.5) {
        let coordinates = points.map { "\(n($0.0)),\(n($0.1))" }.joined(separator: " ")
        add("<polyline points=\"\(coordinates)\" fill=\"none\" stroke=\"\(stroke)\" stroke-width=\"\(n(width))\"/>")
    }

    mutating func circle(x: Double, y: Double, r: Double, fill: String, opacity: Double = 1) {
        add("<circle cx=\"\(n(x))\" cy=\"\(n(y))\" r=\"\(n(r))\" fill=\"\(fill)\"" + (opacity < 1 ? " fill-opacity=\"\(n(opacity))\"" : "") + "/>")
    }

    /// A number with at most two decimals, as SVG wants it.
    func n(_ value: Double) -> String { SVGCanvas.number(value) }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        let rounded = (value * 100).rounded() / 100
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}

/// Maps data values to pixels, linearly or logarithmically.
struct ChartScale {
    var lower: Double
    var upper: Double
    var pixelLower: Double
    var pixelUpper: Double
    var logarithmic = false

    /// A scale over `values` (from zero when linear); logarithmic if they span more than `logAbove` times.
    static func fitting(_ values: [Double], pixels: (Double, Double), logAbove ratio: Double? = nil) -> ChartScale {
        let positive = values.filter { $0 > 0 }
        if let ratio, let low = positive.min(), let high = positive.max(), high / low > ratio {
            let decade = pow10(floor(log10(low)))
            let lower = [5.0, 2, 1].map { $0 * decade }.first { $0 <= low } ?? decade
            return ChartScale(lower: lower, upper: niceCeiling(high), pixelLower: pixels.0, pixelUpper: pixels.1, logarithmic: true)
        }
        let high = values.max() ?? 1
        return ChartScale(lower: 0, upper: high > 0 ? niceCeiling(high) : 1, pixelLower: pixels.0, pixelUpper: pixels.1)
    }

    func callAsFunction(_ value: Double) -> Double {
        let fraction: Double
        if logarithmic {
            fraction = (log10(max(value, lower)) - log10(lower)) / (log10(upper) - log10(lower))
        } else {
            fraction = (value - lower) / (upper - lower)
        }
        return pixelLower + min(1, max(0, fraction)) * (pixelUpper - pixelLower)
    }

    /// Round values to label: 1-2-5 steps (per decade when logarithmic).
    var ticks: [Double] {
        if logarithmic {
            var ticks: [Double] = []
            var decade = Self.pow10(floor(log10(lower)))
            while decade <= upper * 1.0001 {
                for factor in [1.0, 2, 5] where decade * factor >= lower * 0.9999 && decade * factor <= upper * 1.0001 {
                    ticks.append(decade * factor)
                }
                decade *= 10
            }
            return ticks
        }
        let step = Self.niceStep((upper - lower) / 5)
        return stride(from: lower, through: upper + step / 1000, by: step).map { $0 }
    }

    /// The smallest 1-2-5 step at least `rough`.
    static func niceStep(_ rough: Double) -> Double {
        guard rough > 0 else { return 1 }
        let decade = pow10(floor(log10(rough)))
        for factor in [1.0, 2, 2.5, 5, 10] where decade * factor >= rough { return decade * factor }
        return decade * 10
    }

    /// `value` rounded up to a value that ends a tick sequence.
    static func niceCeiling(_ value: Double) -> Double {
        let step = niceStep(value / 5)
        return (value / step).rounded(.up) * step
    }

    private static func pow10(_ exponent: Double) -> Double { pow(10, exponent) }
}

/// A chart area: where it sits on the canvas, its two scales and its labels.
struct ChartFrame {
    var left: Double
    var top: Double
    var width: Double
    var height: Double
    var bottom: Double { top + height }
    var right: Double { left + width }

    /// Draws the frame, grid, ticks and labels of `x` and `y`.
    func drawAxes(
        on canvas: inout SVGCanvas, x: ChartScale, y: ChartScale, xLabel: String, yLabel: String,
        xFormat: (Double) -> String = ChartFrame.label, yFormat: (Double) -> String = ChartFrame.label
    ) {
        canvas.rect(x: left, y: top, width: width, height: height, fill: "#fafafa")
        canvas.open("class=\"axis x\"")
        for tick in x.ticks {
            let position = x(tick)
            canvas.line(x1: position, y1: top, x2: position, y2: bottom, stroke: "#e3e3e3")
            canvas.line(x1: position, y1: bottom, x2: position, y2: bottom + 4, stroke: "#444")
            canvas.text(xFormat(tick), x: position, y: bottom + 16, anchor: "middle", size: 11, attributes: "class=\"tick\"")
        }
        canvas.line(x1: left, y1: bottom, x2: right, y2: bottom, stroke: "#444")
        canvas.text(xLabel, x: left + width / 2, y: bottom + 32, anchor: "middle", attributes: "class=\"axis-label\"")
        canvas.close()
        canvas.open("class=\"axis y\"")
        for tick in y.ticks {
            let position = y(tick)
            canvas.line(x1: left, y1: position, x2: right, y2: position, stroke: "#e3e3e3")
            canvas.line(x1: left - 4, y1: position, x2: left, y2: position, stroke: "#444")
            canvas.text(yFormat(tick), x: left - 7, y: position + 4, anchor: "end", size: 11, attributes: "class=\"tick\"")
        }
        canvas.line(x1: left, y1: top, x2: left, y2: bottom, stroke: "#444")
        let middle = top + height / 2
        canvas.text(
            yLabel, x: left - 52, y: middle, anchor: "middle",
            attributes: "class=\"axis-label\" transform=\"rotate(-90 \(canvas.n(left - 52)) \(canvas.n(middle)))\"")
        canvas.close()
    }

    /// A tick label: whole numbers plain, others with up to two decimals.
    static func label(_ value: Double) -> String {
        if abs(value) >= 10_000 { return "\(Int((value / 1000).rounded()))k" }
        return SVGCanvas.number(value)
    }
}
