// kf_round: normalise, round to nearest even and pack an unrounded result (combinational).
//   The input value is sig / 2**(SW-1) * 2**(exp - BIAS) plus a positive amount below the last
//   bit of sig when sticky is set.  exp is two's complement (XW bits); sig need not be
//   normalised.  Front ends must pass sig != 0 for every nonzero value (sticky alone is not a
//   value).  The result is the binary(1+EW+MW) value, with subnormal results, overflow to
//   +-inf, and the flags taking priority in the order nan (canonical quiet NaN, sign 0),
//   inf (signed infinity), zero (signed zero; also used when sig == 0).
//   Requires SW >= MW + 3 and XW > $clog2(SW + 1).
`default_nettype none
module kf_round #(
    parameter EW = 8,
    parameter MW = 23,
    parameter SW = MW + 3,
    parameter XW = EW + 2
) (
    input  wire           nan,
    input  wire           inf,
    input  wire           zero,
    input  wire           sign,
    input  wire [XW-1:0]  exp,
    input  wire [SW-1:0]  sig,
    input  wire           sticky,
    output reg  [EW+MW:0] y
);
    localparam CW = $clog2(SW + 1);
    localparam [XW-1:0] ONE = 1;
    localparam integer SWI = SW;
    localparam [XW-1:0] SWX = SWI[XW-1:0];
    localparam integer EMAX_I = (1 << EW) - 1;
    localparam [XW-1:0] EMAX = EMAX_I[XW-1:0];
    localparam [EW+MW:0] QNAN = {1'b0, {EW{1'b1}}, 1'b1, {(MW-1){1'b0}}};
    localparam [EW+MW:0] INF = {1'b0, {EW{1'b1}}, {MW{1'b0}}};

    wire [CW-1:0] lz;
    kf_lzc #(.W(SW), .CW(CW)) u_lzc (.in(sig), .count(lz));

    reg [XW-1:0]    avail;
    reg [XW-1:0]    lzx;
    reg [XW-1:0]    efield;
    reg [XW-1:0]    rshift;
    reg [SW-1:0]    s2;
    reg             lost;
    reg [MW-1:0]    frac;
    reg             rbit;
    reg             stk;
    reg             ovf;
    reg [EW+MW-1:0] mag;

    always @* begin
        avail = exp - ONE;
        lzx = {{(XW-CW){1'b0}}, lz};
        efield = {XW{1'b0}};
        rshift = {XW{1'b0}};
        lost = 1'b0;
        if ($signed(avail) >= $signed(lzx)) begin
            // normal result: shift the leading one to the top
            s2 = sig << lz;
            efield = exp - lzx;
        end else if (!avail[XW-1]) begin
            // subnormal result reached by a partial left shift
            s2 = sig << avail;
        end else begin
            // subnormal result: shift right by 1 - exp, collecting the lost bits
            rshift = ONE - exp;
            if ($signed(rshift) > $signed(SWX)) rshift = SWX;
            s2 = sig >> rshift;
            lost = (sig & ~({SW{1'b1}} << rshift)) != {SW{1'b0}};
        end
        frac = s2[SW-2 -: MW];
        rbit = s2[SW-2-MW];
        stk = sticky | lost | (s2[SW-3-MW:0] != {(SW-2-MW){1'b0}});
        ovf = $signed(efield) >= $signed(EMAX);
        // a carry out of the fraction bumps the exponent (and reaches inf from the top binade)
        mag = {efield[EW-1:0], frac} + {{(EW+MW-1){1'b0}}, rbit & (stk | frac[0])};
        if (nan) y = QNAN;
        else if (inf | ovf) y = INF | {sign, {(EW+MW){1'b0}}};
        else if (zero | (sig == {SW{1'b0}})) y = {sign, {(EW+MW){1'b0}}};
        else y = {sign, mag};
    end
endmodule
`default_nettype wire
