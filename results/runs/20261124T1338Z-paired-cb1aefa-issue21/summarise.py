import json,glob,statistics as st,sys,collections
rows=collections.defaultdict(dict)
for d in sorted(glob.glob('/tmp/perf21/*')):
    side=d.split('/')[-1]
    for f in sorted(glob.glob(d+'/*.json')):
        r=json.load(open(f))
        impl=r.get('implementation') or r.get('impl'); q=r.get('query'); q=q.get('name') if isinstance(q,dict) else q
        t=r.get('timings') or {}
        m=r['metrics']; idx=0; qs=m.get('query_s')
        rows[(impl,str(q))].setdefault(side,[]).append((idx,qs,r.get('count'),r.get('status')))
for k,v in rows.items():
    for side,vals in v.items():
        warm=vals[1:]
        tot=[(a or 0)+(b or 0) for a,b,_,_ in warm]
        print(k,side,'n',len(vals),'counts',{c for _,_,c,_ in vals},'status',{s for *_,s in vals},'median query_s (trials 2..)',round(st.median(tot),3) if tot else None, [round(x,2) for x in tot])
