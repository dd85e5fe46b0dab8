import Foundation
import NIOCore
import SIMPClient
import SIMPCore

/// Runs `simp chat`: a `ChatSession` wired to a connected `SIMPClient`, the terminal
/// (raw mode, window size, signals) and the history file. The client's `messageHandler` must be
/// `history.recordIncoming`, so incoming messages are in the history before their receipts.
/// Sendable: `signalSources` and `historyUnwritable` are touched only by `run()`'s task; the
/// tasks it starts only `post` events to it.
public final class ChatController: @unchecked Sendable {
    /// How `simp chat` was asked to behave.
    public struct Options: Sendable {
        public var peer: String?
        /// Colours unless false; also off when `NO_COLOR` is set or output is not a terminal.
        public var colors = true
        /// Without a terminal: how long to wait at end of input for unresolved messages.
        public var drainTimeout: TimeAmount = .seconds(10)
        public var environment = ProcessInfo.processInfo.environment
        /// Log messages to show as notices while the chat runs.
        public var log: ChatLog?
        /// Send read markers when the user has seen a conversation.
        public var readReceipts = true
        /// Ring the terminal bell for a message from someone other than the current peer.
        public var bell = true
        /// The colours of names, marks and notices.
        public var palette = Palette.standard
        /// What the outbox held before the client connected (`Outbox.load()`): the messages an
        /// earlier session left, resent at start. Nil: the outbox is read at start, and then
        /// also holds what this session's client sent while connecting (its own frames).
        public var outboxAtStart: (messages: [SIMPMessage], unreadable: [String])?
        /// Where files sent to this user are saved (nil: `$SIMP_HOME/downloads`).
        public var downloads: String?

        public init(peer: String? = nil) {
            self.peer = peer
        }
    }

    /// Everything the session reacts to, in the order it happened.
    enum Event: Sendable {
        case keys([Key]), line(String), endOfInput
        case incoming(SIMPMessage), connection(ConnectionState), notice(DeliveryNotice)
        case roomAnswered(ChatRoomRequest, Result<[String], ChatRoomError>)
        case peer(PeerEvent), whoAnswered(Result<[PresenceEntry], ChatRoomError>, show: Bool)
        case submitted(ref: Int, messageId: UInt64, inMemoryOnly: Bool), resolved(ref: Int, DeliveryStatus)
        case resize, drainTimeout, signal, tick
        case log(String)
        case endToEnd(EndToEndNotice)
        case safetyNumbers(peer: String, Result<[(device: String, number: String)], ChatRoomError>)
        case verified(peer: String, Result<Int, ChatRoomError>)
        case accepted(peer: String, Result<Bool, ChatRoomError>)
        /// The client's datagrams moved to another path.
        case path(DatagramPath)
        /// Files: a file to send looked at; a transfer's progress; a file received and saved,
        /// or not received.
        case fileChecked(to: String, Result<ChatFile, ChatRoomError>)
        case fileProgress(ref: Int, String)
        /// The relay holds a sent file whole (as `fileId`) for its receiver's devices.
        case fileStored(ref: Int, fileId: UInt64)
        /// A room file was sent: `delivered` of `of` members have it, and the relay holds it
        /// for the members of `heldFor` (by file id) until their devices fetch it.
        case roomFileHeld(ref: Int, heldFor: [String: UInt64], delivered: Int, of: Int)
        case fileSaved(from: String, ChatFile, receivedBefore: Bool)
        case fileNotReceived(String)
    }

    let client: SIMPClient
    private let history: ChatHistory
    let options: Options
    private let events: AsyncStream<Event>
    let post: AsyncStream<Event>.Continuation
    /// Files: the client's file datagrams shared between the transfers, and the downloads
    /// (nil without end to end encryption, or when the downloads folder cannot be used).
    var fileRouter: FileDatagramRouter?
    var downloads: FileDownloads?
    private let input = TerminalInput()
    private var signalSources: [DispatchSourceSignal] = []

    /// The exit status after a newer session of this device took over (see `SIMPClientError.takenOver`).
    public static let takenOverStatus: Int32 = 3

    /// A controller for `client`, whose `messageHandler` records into `history`.
    public init(client: SIMPClient, history: ChatHistory, options: Options) {
        self.client = client
        self.history = history
        self.options = options
        (events, post) = AsyncStream.makeStream(of: Event.self)
    }

    /// Runs until the user quits (or input ends); returns the exit status. The terminal is
    /// restored and the client closed before it returns.
    public func run() async -> Int32 {
        let interactive = Terminal.isTerminal(STDIN_FILENO) && Terminal.isTerminal(STDOUT_FILENO)
        let noColor = !(options.environment["NO_COLOR"] ?? "").isEmpty
        let size = interactive ? Terminal.windowSize() : nil
        var screen = Screen(
            width: size?.width ?? 80, height: size?.height ?? 24,
            interactive: interactive, colors: options.colors && !noColor)
        screen.palette = options.palette
        let store = history.store
        // Without --to, the chat starts with whoever the user talked to last.
        let lastPeer = options.peer == nil ? store?.loadLastPeer() : nil
        var session = ChatSession(
            user: client.configuration.user, peer: options.peer ?? lastPeer, screen: screen, history: history.entries, clock: .system)
        session.peerIsFromLastTime = lastPeer != nil
        var rememberedPeer = lastPeer
        session.sendsReadMarkers = options.readReceipts
        if !client.configuration.device.isEmpty { session.device = client.configuration.device }
        session.rings = options.bell
        session.listDirectory = { Self.directoryEntries($0) }
        if interactive {
            do { try Terminal.enableRawMode() } catch {
                FileHandle.standardError.write(Data("simp: \(error)\n".utf8))
                await client.close()
                return 1
            }
        }
        if let problem = startFiles() { session.inform(problem) }
        startSources(interactive: interactive)
        let sender = startSender()
        let left = options.outboxAtStart ?? client.configuration.outbox?.load()
        for effect in session.start(resending: left?.messages ?? []) {
            if case .send(let ref, let message) = effect { sender.yield((ref, message)) }
            if case .resubmit(let message) = effect { sender.yield((Self.unreported, message)) }
        }
        for name in left?.unreadable ?? [] { session.inform("outbox: \(name) could not be read; set aside as \(name).bad") }
        if store == nil { session.inform("history is off: cannot use \(history.directory.path)") }
        Terminal.write(session.takeOutput())

        var status: Int32 = 0
        loop: for await event in events {
            let effects = apply(event, to: &session)
            Terminal.write(session.takeOutput())
            if session.peer != rememberedPeer {
                rememberedPeer = session.peer
                keepInHistory { try store?.saveLastPeer(rememberedPeer) }
            }
            for effect in effects {
                switch effect {
                case .send(let ref, let message): sender.yield((ref, message))
                case .resubmit(let message): sender.yield((Self.unreported, message))
                case .record(let entry): keepInHistory { try store?.append(entry) }
                case .recordStatus(let id, let name): keepInHistory { try store?.update(id: id, status: name) }
                case .recordFile(let id, let from, let file): keepInHistory { try store?.update(id: id, from: from, file: file) }
                case .startDrainTimer: startDrainTimer()
                case .wake(let millis): wake(afterMillis: millis)
                case .room(let request): startRoomRequest(request)
                case .markRead(let sender, let upTo): Task { [client] in await client.markRead(from: sender, upTo: upTo) }
                case .typing(let peer): Task { [client] in await client.sendTyping(to: peer) }
                case .who(let users, let room, let show): startWho(users: users, room: room, show: show)
                case .safetyNumbers(let peer): startSafetyNumbers(with: peer)
                case .confirmVerified(let peer): startConfirmingVerified(peer)
                case .acceptKeyChange(let peer):
                    Task { [client, post] in
                        do { post.yield(.accepted(peer: peer, .success(try await client.acceptKeyChange(of: peer)))) } catch {
                            post.yield(.accepted(peer: peer, .failure(ChatRoomError("\(error)"))))
                        }
                    }
                case .checkFile(let path, let peer, let image):
                    Task { [client, post] in post.yield(.fileChecked(to: peer, Self.look(at: path, image: image, client: client))) }
                case .sendFile(let ref, let file, let peer): startFileSend(ref: ref, file, to: peer)
                case .reconnect:
                    Task { [client, post] in
                        if await !client.reconnect() { post.yield(.log("the client is not stopped: it reconnects by itself")) }
                    }
                case .quit(let exitStatus):
                    status = exitStatus
                    break loop
                }
            }
        }
        options.log?.detach()
        input.stop()
        fileRouter?.stop()
        sender.finish()
        for source in signalSources { source.cancel() }
        Terminal.restore()
        try? store?.writeWaiting()
        if let unwritten = store?.waitingCount, unwritten > 0 {
            FileHandle.standardError.write(
                Data(
                    "simp: \(unwritten) history record(s) of this session could not be written to \(history.directory.path) and are lost now\n"
                        .utf8))
        }
        for line in MessageFormatting.lostAtExit(await client.messagesKeptInMemoryOnly) {
            FileHandle.standardError.write(Data("simp: \(line)\n".utf8))
        }
        let takenOver = await client.wasTakenOver
        await client.close()
        return status == 0 && takenOver ? Self.takenOverStatus : status
    }

    /// Whether the history could not be written (disk full, read-only) at the last try: its
    /// records wait in memory (`HistoryStore.waitingCount`) and are written, in order, with the
    /// next record or clock tick once it can be. Said once as it happens and once when it
    /// works again; what is still unwritten at exit is counted then.
    private var historyUnwritable = false

    private func keepInHistory(_ write: () throws -> Void) {
        do {
            try write()
            if historyUnwritable {
                historyUnwritable = false
                post.yield(.log("history can be written again: the records kept in memory are in it now"))
            }
        } catch {
            guard !historyUnwritable else { return }
            historyUnwritable = true
            let line =
                "history cannot be written (\(error)): its records are kept in memory and written when it can be; "
                + "nothing is lost while simp runs"
            post.yield(.log(line))
        }
    }

    private func apply(_ event: Event, to session: inout ChatSession) -> [ChatEffect] {
        switch event {
        case .keys(let keys): return session.handle(keys)
        case .line(let line): return session.submitLine(line)
        case .endOfInput: return session.endOfInput()
        case .incoming(let message): return session.receive(message)
        case .notice(let notice): return session.noticed(notice)
        case .roomAnswered(let request, let answer):
            session.roomAnswered(request, answer)
            return []
        case .peer(let event): return session.peerEvent(event)
        case .tick:
            session.clockTicked()
            if historyUnwritable { keepInHistory { try history.store?.writeWaiting() } }
            return []
        case .whoAnswered(let entries, let show):
            session.whoAnswered(entries, show: show)
            return []
        case .connection(let state):
            session.connectionChanged(state)
            if case .connected = state { return session.followCurrentPeer() }
            return []
        case .submitted(let ref, let id, let inMemoryOnly):
            if inMemoryOnly { session.undeliveredAreLostAtExit = true }
            return session.submitted(ref: ref, messageId: id)
        case .resolved(let ref, let status): return session.resolved(ref: ref, status)
        case .resize:
            if let size = Terminal.windowSize() { session.resize(width: size.width, height: size.height) }
            return []
        case .drainTimeout: return session.drainTimedOut()
        case .signal: return [.quit(status: 130)]
        case .log(let line):
            session.inform(line)
            return []
        case .path(let path):
            session.datagramPathChanged(path)
            return []
        case .endToEnd(let news):
            session.endToEndNoticed(news)
            return []
        case .safetyNumbers(let peer, let answer):
            session.safetyNumbersAnswered(with: peer, answer)
            return []
        case .verified(let peer, let answer):
            session.verifiedConfirmed(peer, answer)
            return []
        case .accepted(let peer, let answer):
            session.keyChangeAccepted(peer, answer)
            return []
        case .fileChecked(let peer, let result): return session.fileChecked(to: peer, result)
        case .fileProgress(let ref, let progress):
            session.fileProgress(ref: ref, progress)
            return []
        case .fileStored(let ref, let fileId):
            return session.fileStored(ref: ref, fileId: fileId)
        case .roomFileHeld(let ref, let heldFor, let delivered, let members):
            return session.roomFileHeld(ref: ref, heldFor: heldFor, delivered: delivered, of: members)
        case .fileSaved(let from, let file, let receivedBefore):
            return session.fileSaved(from: from, file, receivedBefore: receivedBefore)
        case .fileNotReceived(let reason):
            session.fileNotReceived(reason)
            return []
        }
    }

    /// Feeds stdin, the client's streams and signals into `events`.
    private func startSources(interactive: Bool) {
        let post = self.post
        options.log?.attach { post.yield(.log($0)) }
        if interactive {
            input.startKeys({ post.yield(.keys($0)) }, onEnd: { post.yield(.endOfInput) })
        } else {
            input.startLines({ post.yield(.line($0)) }, onEnd: { post.yield(.endOfInput) })
        }
        Task { [client, downloads] in
            for await message in client.messages {
                // A file's announcement (end to end only: its key travels in it) starts its
                // download; the room it names is kept only if the relay lists both as members.
                guard message.fileId != 0, message.isEndToEnd else {
                    post.yield(.incoming(message))
                    continue
                }
                let checked = await client.checkingFileRoom(message)
                post.yield(.incoming(checked))
                if let downloads { Task { await downloads.offered(checked, roomChecked: true) } }
            }
        }
        Task { [client] in
            for await state in client.connectionStates { post.yield(.connection(state)) }
        }
        Task { [client] in
            for await notice in client.notices { post.yield(.notice(notice)) }
        }
        Task { [client] in
            for await path in client.datagramPaths { post.yield(.path(path)) }
        }
        Task { [client] in
            for await event in client.peerEvents { post.yield(.peer(event)) }
        }
        Task { [client] in
            for await news in client.endToEndNotices { post.yield(.endToEnd(news)) }
        }
        let signals: [(Int32, Event)] = [(SIGWINCH, .resize), (SIGINT, .signal), (SIGTERM, .signal), (SIGHUP, .signal)]
        for (number, event) in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { post.yield(event) }
            source.resume()
            signalSources.append(source)
        }
    }

    /// Submits messages one at a time, in the order they were typed, and reports each outcome.
    private func startSender() -> AsyncStream<(Int, SIMPMessage)>.Continuation {
        let (requests, continuation) = AsyncStream.makeStream(of: (Int, SIMPMessage).self)
        Task { [client, post] in
            for await (ref, message) in requests {
                if ref == Self.unreported {
                    _ = try? await client.submit(message)
                    continue
                }
                do {
                    let (id, outcome) = try await client.submit(message)
                    let inMemoryOnly = await client.messagesKeptInMemoryOnly.contains { $0.messageId == id }
                    post.yield(.submitted(ref: ref, messageId: id, inMemoryOnly: inMemoryOnly))
                    outcome.whenComplete { result in
                        switch result {
                        case .success(.connectionLost):
                            break // the client stopped: the message stays pending, in the outbox (a notice says if it is delivered after /reconnect)
                        case .success(let sendResult): post.yield(.resolved(ref: ref, DeliveryStatus(sendResult)))
                        case .failure(let error): post.yield(.resolved(ref: ref, .failed("\(error)")))
                        }
                    }
                } catch {
                    post.yield(.resolved(ref: ref, .failed("\(error)")))
                }
            }
        }
        return continuation
    }

    /// The ref of a message whose outcome the session does not follow (`ChatEffect.resubmit`).
    private static let unreported = -1

    /// Asks the client and posts the answer back as an event.
    private func startRoomRequest(_ request: ChatRoomRequest) {
        Task { [client, post] in
            do {
                let members: [String]
                switch request {
                case .join(let room): members = try await client.joinRoom(room)
                case .leave(let room): try await client.leaveRoom(room); members = []
                case .members(let room), .watch(let room): members = try await client.roomMembers(room)
                case .admit(let room, let user):
                    try await client.admit(user, toRoom: room)
                    members = []
                }
                post.yield(.roomAnswered(request, .success(members)))
            } catch SIMPClientError.rejected(_, let text) {
                post.yield(.roomAnswered(request, .failure(ChatRoomError(text))))
            } catch {
                post.yield(.roomAnswered(request, .failure(ChatRoomError("\(error)"))))
            }
        }
    }

    private func startWho(users: [String], room: String?, show: Bool) {
        Task { [client, post] in
            do {
                let entries: [PresenceEntry]
                if let room { entries = try await client.who(room: room) } else { entries = try await client.who(users) }
                post.yield(.whoAnswered(.success(entries), show: show))
            } catch SIMPClientError.rejected(_, let text) {
                post.yield(.whoAnswered(.failure(ChatRoomError(text)), show: show))
            } catch {
                post.yield(.whoAnswered(.failure(ChatRoomError("\(error)")), show: show))
            }
        }
    }

    private func startConfirmingVerified(_ peer: String) {
        Task { [client, post] in
            do {
                post.yield(.verified(peer: peer, .success(try await client.markVerified(peer))))
            } catch {
                post.yield(.verified(peer: peer, .failure(ChatRoomError("\(error)"))))
            }
        }
    }

    private func startSafetyNumbers(with peer: String) {
        Task { [client, post] in
            do {
                post.yield(.safetyNumbers(peer: peer, .success(try await client.safetyNumbers(with: peer))))
            } catch {
                post.yield(.safetyNumbers(peer: peer, .failure(ChatRoomError("\(error)"))))
            }
        }
    }

    /// Posts a `.tick` after `millis` (the session's clock has something due then).
    private func wake(afterMillis millis: Int64) {
        Task { [post] in
            try? await Task.sleep(nanoseconds: UInt64(max(0, millis)) * 1_000_000)
            post.yield(.tick)
        }
    }

    private func startDrainTimer() {
        let delay = UInt64(options.drainTimeout.nanoseconds)
        Task { [post] in
            try? await Task.sleep(nanoseconds: delay)
            post.yield(.drainTimeout)
        }
    }
}

extension ChatClock {
    /// The wall clock; times shown as `HH:mm:ss` today and `MMM d HH:mm` on other days.
    public static var system: ChatClock {
        ChatClock(
            now: { Int64(Date().timeIntervalSince1970 * 1000) },
            format: { millis in
                let date = Date(timeIntervalSince1970: Double(millis) / 1000)
                let formatter = DateFormatter()
                formatter.dateFormat = Calendar.current.isDateInToday(date) ? "HH:mm:ss" : "MMM d HH:mm"
                return formatter.string(from: date)
            })
    }
}
