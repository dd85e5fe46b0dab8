/// Default device names of random words (`amber-otter-3fa2`): other users see device names
/// (docs/PROTOCOL.md §4.8), so a default one tells nothing about the machine or its owner.
public enum RandomDeviceName {
    /// 64 short adjectives.
    static let adjectives = [
        "amber", "azure", "bold", "brave", "brisk", "calm", "clear", "coral", "crisp", "dawn", "deep", "dry", "early", "easy",
        "fair", "fast", "fern", "fine", "firm", "fresh", "glad", "gold", "grand", "green", "grey", "happy", "hazel", "high",
        "ivory", "jade", "keen", "kind", "late", "light", "lime", "lucky", "mild", "mint", "misty", "neat", "noble", "oak",
        "olive", "pale", "plain", "proud", "quick", "quiet", "rapid", "red", "rosy", "royal", "ruby", "sage", "sharp", "shy",
        "silver", "sleek", "snowy", "solar", "steady", "sunny", "swift", "warm",
    ]
    /// 64 short nouns.
    static let nouns = [
        "badger", "bear", "bee", "bison", "cedar", "cloud", "comet", "crane", "creek", "crow", "deer", "delta", "dove", "eagle",
        "elm", "falcon", "finch", "fjord", "fox", "frog", "gecko", "hare", "hawk", "heron", "hill", "ibis", "island", "jay",
        "koala", "lake", "lark", "lemur", "lynx", "maple", "marsh", "meadow", "mole", "moose", "moth", "newt", "otter", "owl",
        "panda", "pine", "plover", "pond", "quail", "raven", "reef", "river", "robin", "seal", "shore", "sparrow", "stone",
        "swan", "tern", "tiger", "trout", "vale", "wave", "willow", "wren", "yak",
    ]

    /// `ADJECTIVE-NOUN-XXXX` (four hex digits): 2^28 names, a valid device name.
    public static func make(using random: inout some RandomNumberGenerator) -> String {
        let adjective = adjectives[Int.random(in: 0..<adjectives.count, using: &random)]
        let noun = nouns[Int.random(in: 0..<nouns.count, using: &random)]
        let suffix = String(UInt16.random(in: .min ... .max, using: &random), radix: 16)
        return adjective + "-" + noun + "-" + String(repeating: "0", count: 4 - suffix.count) + suffix
    }
}
