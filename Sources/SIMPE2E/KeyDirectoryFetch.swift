/// The rule for one key fetch's answers (docs/E2E.md §18.4–18.5), sans-I/O: what a client does
/// once `KeyDirectoryView` judged an answer. A proved answer is taken. A stale one (the view
/// moved since the request) is neither taken nor an alarm: it is asked again at once, from the
/// view's size then, at most `repeats` times, after which the fetch gives up for now (nothing
/// taken, the list held stays, the next fetch tries again; logged, the user is not told). An
/// answer that contradicts what the client verified (a fork, a rollback, a proof or head that
/// does not verify, another tree key) is refused and its problem told to the user. No timer: a
/// stale answer is asked again without waiting. The shell sends, takes and tells what the
/// steps say.
public struct KeyDirectoryFetch: Equatable, Sendable {
    /// How many times a fetch asks again after a stale answer before it gives up for now.
    public static let staleAnswerRepeats = 2

    /// What the client does with an answer.
    public enum Step: Equatable, Sendable {
        /// Take the answer's entry (the view holds its head, or a larger one; or the relay keeps
        /// no log and the answer carries no proof, taken as before).
        case take
        /// Take nothing from it, and send the request again at once saying `knownTreeSize`,
        /// naming in `members` every device the stale answer listed (so that no one-time
        /// prekey is claimed again); its answer goes to `answered` too.
        case askAgain(knownTreeSize: UInt64)
        /// Every answer was stale: take nothing, keep what is held, raise no alarm, log it.
        case giveUp
        /// Refuse the answer and tell the user `problem` (a `.forked` one is a fork of the
        /// relay's log, counted as such).
        case refuse(KeyDirectoryView.Problem)
    }

    /// The size this client said it knew (`knownTreeSize`) in the request now being answered.
    public private(set) var askedAt: UInt64
    /// How many stale answers came so far.
    public private(set) var staleAnswers = 0
    /// How many times a stale answer is asked again.
    public let repeats: Int

    /// A fetch asked from what `view` holds now (send `askedAt` as `knownTreeSize`).
    public init(from view: KeyDirectoryView, repeats: Int = Self.staleAnswerRepeats) {
        askedAt = view.latest?.size ?? 0
        self.repeats = repeats
    }

    /// An answer was judged by the view (`checkEntry` with `askedAt`; nil when the answer carries
    /// no list or no proof); `view` is the view after that check. Returns what to do with it.
    public mutating func answered(_ judged: Result<KeyDirectoryView.Verdict, KeyDirectoryView.Problem>?, view: KeyDirectoryView) -> Step {
        switch judged {
        case nil, .success(.proved)?: return .take
        case .failure(let problem)?: return .refuse(problem)
        case .success(.stale)?:
            staleAnswers += 1
            guard staleAnswers <= repeats else { return .giveUp }
            askedAt = view.latest?.size ?? 0
            return .askAgain(knownTreeSize: askedAt)
        }
    }
}
