package nexmark

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Kind says which of the three Nexmark event types an Event is.
type Kind uint8

// The event kinds.
const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

// String returns "person", "auction" or "bid".
func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Person is a new user of the auction site.
type Person struct {
	ID         int64
	Name       string
	Email      string
	CreditCard string
	City       string
	State      string
	Time       int64 // when the person registered, in ms of event time
}

// Auction is a new auction.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	Time        int64 // when the auction opened, in ms of event time
	Expires     int64 // when it closes, in ms of event time
	Seller      int64 // a Person's ID
	Category    int64
}

// Bid is a bid on an auction.
type Bid struct {
	Auction int64 // an Auction's ID
	Bidder  int64 // a Person's ID
	Price   int64 // in cents
	Time    int64 // when the bid was placed, in ms of event time
}

// Event is one event of the stream: a person, an auction or a bid, as
// Kind says. Bids, 92% of the stream, are held inline; persons and
// auctions by pointer, so that an Event stays small.
type Event struct {
	Kind    Kind
	Time    int64 // the event's time, in ms of event time
	Bid     Bid   // when Kind is KindBid
	Person  *Person
	Auction *Auction
}

// The generator's parameters: Beam's GeneratorConfig and
// NexmarkConfiguration defaults, but for the rate (see InterEventDelayUs).
const (
	// FirstPersonID, FirstAuctionID and FirstCategoryID are the first ids
	// (Beam's: ids start high so that small streams find matches).
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10

	// PersonProportion, AuctionProportion and BidProportion are the
	// proportions of the three kinds: of every ProportionDenominator
	// consecutive events, the first is a person, the next three are
	// auctions and the other 46 are bids.
	PersonProportion      = 1
	AuctionProportion     = 3
	BidProportion         = 46
	ProportionDenominator = PersonProportion + AuctionProportion + BidProportion

	// NumCategories is the number of auction categories.
	NumCategories = 5
	// NumActivePeople is how many of the latest persons auctions and bids
	// choose from (plus PersonIDLead persons not created yet).
	NumActivePeople = 1000
	// NumInFlightAuctions is how many of the latest auctions bids choose
	// from (plus AuctionIDLead auctions not created yet).
	NumInFlightAuctions = 100
	// PersonIDLead and AuctionIDLead are how far ahead of the last person
	// and auction a random choice may reach: an auction may name a seller,
	// and a bid an auction, that comes a little later in the stream.
	PersonIDLead  = 10
	AuctionIDLead = 10

	// HotAuctionRatio, HotSellersRatio and HotBiddersRatio are Beam's
	// defaults: a bid is for the hot auction with probability 1 - 1/2, an
	// auction by the hot seller with probability 1 - 1/4, a bid by the hot
	// bidder with probability 1 - 1/4; the other choices are uniform among
	// the active ones.
	HotAuctionRatio = 2
	HotSellersRatio = 4
	HotBiddersRatio = 4
	// HotBatch is Beam's HOT_AUCTION_RATIO, HOT_SELLER_RATIO and
	// HOT_BIDDER_RATIO: the hot auction is the first of the latest batch
	// of 100 auctions, the hot seller the first of the latest batch of 100
	// persons, the hot bidder the second.
	HotBatch = 100

	// InterEventDelayUs is the event time between two events, in µs: one
	// event per millisecond, 1,000 events per second of event time. Beam's
	// default rate is 10,000 events per second (spread over 100
	// generators); the rate only sets how many events a window of event
	// time holds, and at this one the windows of Beam's defaults (10 s)
	// hold 10,000 events, so that a benchmark of a few hundred thousand
	// events closes dozens of them.
	InterEventDelayUs = 1000
	// BaseTime is the time of event 0: 2015-07-15T00:00:00Z, in ms.
	BaseTime = 1_436_918_400_000
)

// EventTime returns the time of event i: events are in event-time order.
func EventTime(i int64) int64 { return BaseTime + i*InterEventDelayUs/1000 }

// EventAt returns event i of the stream of seed: a pure function of (seed,
// i), as Beam's generator seeds a java.util.Random with each event's id, so
// that any event can be generated alone, in any order, on any machine.
// Which kind event i is, which ids it carries and its time depend on i
// alone; the random choices (hot or not, names, prices) on a PCG seeded
// with (seed, i).
func EventAt(seed uint64, i int64) Event {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	t := EventTime(i)
	switch rem := i % ProportionDenominator; {
	case rem < PersonProportion:
		p := nextPerson(i, r, t)
		return Event{Kind: KindPerson, Time: t, Person: p}
	case rem < PersonProportion+AuctionProportion:
		a := nextAuction(i, r, t)
		return Event{Kind: KindAuction, Time: t, Auction: a}
	default:
		return Event{Kind: KindBid, Time: t, Bid: nextBid(i, r, t)}
	}
}

// Generate returns events 0 to n-1 of the stream of seed.
func Generate(seed uint64, n int) []Event {
	events := make([]Event, n)
	for i := range events {
		events[i] = EventAt(seed, int64(i))
	}
	return events
}

// lastBase0PersonID returns the id (from 0) of the last person created at
// event id: the current one if the event is a person.
func lastBase0PersonID(id int64) int64 {
	epoch, offset := id/ProportionDenominator, id%ProportionDenominator
	if offset >= PersonProportion {
		offset = PersonProportion - 1
	}
	return epoch*PersonProportion + offset
}

// lastBase0AuctionID returns the id (from 0) of the last auction created
// at event id: the current one if the event is an auction.
func lastBase0AuctionID(id int64) int64 {
	epoch, offset := id/ProportionDenominator, id%ProportionDenominator
	switch {
	case offset < PersonProportion:
		epoch--
		offset = AuctionProportion - 1
	case offset >= PersonProportion+AuctionProportion:
		offset = AuctionProportion - 1
	default:
		offset -= PersonProportion
	}
	return epoch*AuctionProportion + offset
}

// nextBase0PersonID returns a random person among the active ones, or a
// few ahead of the last one.
func nextBase0PersonID(id int64, r *rand.Rand) int64 {
	numPeople := lastBase0PersonID(id) + 1
	active := min(numPeople, NumActivePeople)
	return numPeople - active + r.Int64N(active+PersonIDLead)
}

// nextBase0AuctionID returns a random auction among those likely in
// flight, or a few ahead of the last one.
func nextBase0AuctionID(id int64, r *rand.Rand) int64 {
	last := lastBase0AuctionID(id)
	lo := max(last-NumInFlightAuctions, 0)
	return lo + r.Int64N(last-lo+1+AuctionIDLead)
}

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

func nextPerson(id int64, r *rand.Rand, t int64) *Person {
	return &Person{
		ID:         lastBase0PersonID(id) + FirstPersonID,
		Name:       firstNames[r.IntN(len(firstNames))] + " " + lastNames[r.IntN(len(lastNames))],
		Email:      nextString(r, 7) + "@" + nextString(r, 5) + ".com",
		CreditCard: fmt.Sprintf("%04d %04d %04d %04d", r.IntN(10000), r.IntN(10000), r.IntN(10000), r.IntN(10000)),
		City:       usCities[r.IntN(len(usCities))],
		State:      usStates[r.IntN(len(usStates))],
		Time:       t,
	}
}

func nextAuction(id int64, r *rand.Rand, t int64) *Auction {
	var seller int64
	if r.IntN(HotSellersRatio) > 0 {
		seller = lastBase0PersonID(id) / HotBatch * HotBatch
	} else {
		seller = nextBase0PersonID(id, r)
	}
	a := &Auction{
		ID:       lastBase0AuctionID(id) + FirstAuctionID,
		Seller:   seller + FirstPersonID,
		Category: FirstCategoryID + int64(r.IntN(NumCategories)),
		Time:     t,
	}
	a.InitialBid = nextPrice(r)
	a.Expires = t + nextAuctionLength(id, r, t)
	a.ItemName = nextString(r, 20)
	a.Description = nextString(r, 100)
	a.Reserve = a.InitialBid + nextPrice(r)
	return a
}

// nextAuctionLength returns how long an auction opened at event id and
// time t runs, in ms: on average until NumInFlightAuctions more auctions
// have opened (Beam's nextAuctionLengthMs).
func nextAuctionLength(id int64, r *rand.Rand, t int64) int64 {
	events := int64(NumInFlightAuctions) * ProportionDenominator / AuctionProportion
	horizon := EventTime(id+events) - t
	return 1 + r.Int64N(max(horizon*2, 1))
}

func nextBid(id int64, r *rand.Rand, t int64) Bid {
	var auction, bidder int64
	if r.IntN(HotAuctionRatio) > 0 {
		auction = lastBase0AuctionID(id) / HotBatch * HotBatch
	} else {
		auction = nextBase0AuctionID(id, r)
	}
	if r.IntN(HotBiddersRatio) > 0 {
		bidder = lastBase0PersonID(id)/HotBatch*HotBatch + 1
	} else {
		bidder = nextBase0PersonID(id, r)
	}
	return Bid{Auction: auction + FirstAuctionID, Bidder: bidder + FirstPersonID, Price: nextPrice(r), Time: t}
}

// nextPrice returns a price in cents from $1 to $1M, log-uniformly.
func nextPrice(r *rand.Rand) int64 {
	return int64(math.Round(math.Pow(10, r.Float64()*6) * 100))
}

// nextString returns a random string of 3 to maxLen-1 letters and spaces
// (trimmed), as Beam's StringsGenerator.
func nextString(r *rand.Rand, maxLen int) string {
	n := 3 + r.IntN(maxLen-3)
	var b strings.Builder
	b.Grow(n)
	for range n {
		if r.IntN(13) == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return strings.TrimSpace(b.String())
}
