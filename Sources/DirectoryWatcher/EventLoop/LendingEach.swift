extension Array {
    /// Calls `body` with each element in order, lent from a local it is moved to, and moved back
    /// after. An element lent from the array itself (its subscript, or its buffer's) is copied
    /// first, since `body` might change the array meanwhile: for a parsed fanotify record, a
    /// retain and a release through the value witness table, each time. Here `body` cannot reach
    /// the array (the access is exclusive), and nothing is copied.
    @inline(__always)
    mutating func lendEach(_ body: (borrowing Element) -> Void) {
        withUnsafeMutableBufferPointer { elements in
            for index in elements.indices {
                let element = elements.moveElement(from: index)
                body(element)
                elements.initializeElement(at: index, to: element)
            }
        }
    }
}
