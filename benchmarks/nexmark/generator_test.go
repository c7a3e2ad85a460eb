package nexmark

import "testing"

// TestGenerator pins the generator's Beam semantics: the proportions
// (1:3:46 in every 50 events), ids in sequence, event time strictly
// increasing, every event a pure function of (seed, i), and the hot
// auctions, sellers and bidders at Beam's ratios.
func TestGenerator(t *testing.T) {
	const n = 100_000
	events := Generate(seed, n)
	var kinds [3]int
	var persons, auctions int64
	var hotAuction, hotSeller, hotBidder float64
	for i, e := range events {
		kinds[e.Kind]++
		if i > 0 && e.Time <= events[i-1].Time {
			t.Fatalf("event %d at %d, not after event %d at %d", i, e.Time, i-1, events[i-1].Time)
		}
		want := KindBid
		switch r := i % ProportionDenominator; {
		case r < PersonProportion:
			want = KindPerson
		case r < PersonProportion+AuctionProportion:
			want = KindAuction
		}
		if e.Kind != want {
			t.Fatalf("event %d is a %s, want a %s", i, e.Kind, want)
		}
		last := FirstPersonID + persons - 1 // the last person created
		switch e.Kind {
		case KindPerson:
			if e.Person.ID != FirstPersonID+persons || e.Person.Time != e.Time {
				t.Fatalf("person %d: %+v", persons, e.Person)
			}
			persons++
		case KindAuction:
			a := e.Auction
			if a.ID != FirstAuctionID+auctions || a.Time != e.Time || a.Expires <= a.Time ||
				a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories || a.Reserve < a.InitialBid {
				t.Fatalf("auction %d: %+v", auctions, a)
			}
			auctions++
			if a.Seller == (last-FirstPersonID)/HotBatch*HotBatch+FirstPersonID {
				hotSeller++
			}
			if a.Seller < last-NumActivePeople || a.Seller > last+PersonIDLead {
				t.Fatalf("auction %d by seller %d, beyond the active persons (the last is %d)", a.ID, a.Seller, last)
			}
		case KindBid:
			b := e.Bid
			lastAuction := FirstAuctionID + auctions - 1
			if b.Auction == (lastAuction-FirstAuctionID)/HotBatch*HotBatch+FirstAuctionID {
				hotAuction++
			}
			if b.Bidder == (last-FirstPersonID)/HotBatch*HotBatch+1+FirstPersonID {
				hotBidder++
			}
			if b.Auction < lastAuction-NumInFlightAuctions || b.Auction > lastAuction+AuctionIDLead || b.Price < 100 || b.Time != e.Time {
				t.Fatalf("bid %+v (the last auction is %d)", b, lastAuction)
			}
		}
	}
	if kinds != [3]int{n / 50, n / 50 * 3, n / 50 * 46} {
		t.Errorf("persons, auctions, bids = %v, want 1:3:46 of %d", kinds, n)
	}
	// A hot choice is made with probability 1-1/ratio; a uniform choice
	// hits the hot one now and then too. The bounds are several standard
	// deviations wide (the stream is fixed: the test is deterministic).
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"bids on the hot auction", hotAuction / float64(kinds[KindBid]), 1 - 1.0/HotAuctionRatio},
		{"auctions by the hot seller", hotSeller / float64(kinds[KindAuction]), 1 - 1.0/HotSellersRatio},
		{"bids by the hot bidder", hotBidder / float64(kinds[KindBid]), 1 - 1.0/HotBiddersRatio},
	} {
		if c.got < c.want-0.03 || c.got > c.want+0.05 {
			t.Errorf("%s: %.3f, want %.2f (-0.03, +0.05)", c.what, c.got, c.want)
		}
	}
	for _, i := range []int64{0, 1, 4, 49, 50, 12345, n - 1} {
		if a, b := EventAt(seed, i), events[i]; !sameEvent(a, b) {
			t.Errorf("EventAt(%d) = %+v, Generate's is %+v", i, a, b)
		}
	}
	if a, b := EventAt(seed, 10), EventAt(seed+1, 10); sameEvent(a, b) {
		t.Errorf("event 10 is the same under two seeds: %+v", a)
	}
}

func sameEvent(a, b Event) bool {
	if a.Kind != b.Kind || a.Time != b.Time || a.Bid != b.Bid {
		return false
	}
	switch a.Kind {
	case KindPerson:
		return *a.Person == *b.Person
	case KindAuction:
		return *a.Auction == *b.Auction
	}
	return true
}

// TestParseEvents pins what STATEGEN_NEXMARK_EVENTS accepts, and that a
// bad value gets a clear error.
func TestParseEvents(t *testing.T) {
	for s, want := range map[string]int{"200000": 200_000, "200K": 200_000, "1M": 1 << 20, "50": 50} {
		if got, err := ParseEvents(s); err != nil || got != want {
			t.Errorf("ParseEvents(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "lots", "-5", "10", "1.5M", "99999999999999M"} {
		if _, err := ParseEvents(s); err == nil {
			t.Errorf("ParseEvents(%q) accepted it", s)
		}
	}
	if got := EventsName(200_000) + " " + EventsName(1<<20) + " " + EventsName(12345); got != "200K 1M 12345" {
		t.Errorf("EventsName: %s", got)
	}
}
